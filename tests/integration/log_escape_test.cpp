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
