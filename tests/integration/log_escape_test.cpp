// Text logs keep one record per line whatever a plugin or library puts in a message.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fcntl.h>

#include "log/log.hpp"
#include "support/child_process.hpp"
#include "support/temp_dir.hpp"

namespace outbox::test {
namespace {

/// What log::write prints to stderr while `body` runs.
std::string captured_stderr(const std::function<void()>& body) {
    const TempDir dir;
    const std::string path = (dir.path() / "stderr.txt").string();
    std::fflush(stderr);
    const int saved = ::dup(2);
    const int file = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(file, 2);
    ::close(file);
    body();
    std::fflush(stderr);
    ::dup2(saved, 2);
    ::close(saved);
    return read_file(path);
}

TEST(LogEscape, TextLinesEscapeControlCharactersFromMessagesAndFields) {
    const std::string out = captured_stderr([] {
        log::init("info", "text");
        log::warn("plugin says: ok\r\n2026-01-01T00:00:00.000Z info  forged line\x1b[2K\x07",
                  {.handler = "h\nx", .file = "lib\r.so"});
    });
    log::init("info", "text");
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
    EXPECT_EQ(out.find('\r'), std::string::npos) << out;
    EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
    EXPECT_NE(out.find(R"(ok\r\n2026-01-01T00:00:00.000Z info  forged line\x1b[2K\x07)"), std::string::npos) << out;
    EXPECT_NE(out.find(R"(handler=h\nx)"), std::string::npos) << out;
    EXPECT_NE(out.find(R"(file=lib\r.so)"), std::string::npos) << out;
}

TEST(LogEscape, TextLinesEscapeC1SeparatorsBidiControlsAndStrayBytes) {
    const std::string out = captured_stderr([] {
        log::init("info", "text");
        // NEL, CSI (C1), line separator, paragraph separator, RLO, LRI, a lone 0x9b byte.
        log::warn("a\xc2\x85" "b\xc2\x9b" "31m c\xe2\x80\xa8" "d\xe2\x80\xa9" "e\xe2\x80\xae" "f\xe2\x81\xa6" "g\x9bh "
                  "\xea\xb0\x80");
    });
    log::init("info", "text");
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
    EXPECT_NE(out.find(R"(a\u0085b\u009b31m c\u2028d\u2029e\u202ef\u2066g\x9bh )" "\xea\xb0\x80"), std::string::npos)
        << "printable text outside ASCII is kept: " << out;
}

TEST(LogEscape, FieldValuesWithSpacesOrEqualsAreQuoted) {
    const std::string out = captured_stderr([] {
        log::init("info", "text");
        log::warn("loaded", {.handler = "h", .code = "X code=FORGED", .file = "a \"b\".so"});
    });
    log::init("info", "text");
    EXPECT_NE(out.find(R"(loaded handler=h code="X code=FORGED" file="a \"b\".so")"), std::string::npos) << out;
}

TEST(LogEscape, JsonLinesStayOneObjectPerLine) {
    const std::string out = captured_stderr([] {
        log::init("info", "json");
        log::warn("a\r\nb");
    });
    log::init("info", "text");
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
    EXPECT_NE(out.find(R"("msg":"a\r\nb")"), std::string::npos) << out;
}

}  // namespace
}  // namespace outbox::test
