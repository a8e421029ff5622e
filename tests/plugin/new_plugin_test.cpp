// `outboxd new-plugin NAME --dir DIR`: the template compiled into the binary, written out
// with NAME substituted. (The sdk_package test builds the result against the installed
// SDK and runs its GoogleTest.)
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "app/plugin_template.hpp"
#include "support/temp_dir.hpp"

namespace {

namespace fs = std::filesystem;

std::string read_generated(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(NewPlugin, WritesTheTemplateWithTheNameFilledIn) {
    outbox::test::TempDir temp;
    const fs::path dir = temp.path() / "acme-mailer";
    std::ostringstream out;
    std::ostringstream err;
    ASSERT_EQ(outbox::app::new_plugin_command("acme-mailer", dir, out, err), 0) << err.str();

    for (const char* file : {"CMakeLists.txt", "README.md", "src/handler.hpp", "src/handler.cpp", "src/plugin.cpp",
                             "tests/handler_test.cpp"}) {
        ASSERT_TRUE(fs::is_regular_file(dir / file)) << file;
        EXPECT_EQ(read_generated(dir / file).find('@'), std::string::npos) << file << " has a placeholder left";
    }
    EXPECT_NE(read_generated(dir / "CMakeLists.txt").find("find_package(OutboxSdk 1 REQUIRED)"), std::string::npos);
    EXPECT_NE(read_generated(dir / "CMakeLists.txt").find("outbox_add_plugin(acme_mailer "), std::string::npos);
    EXPECT_NE(read_generated(dir / "src/plugin.cpp").find(
                  R"(OUTBOX_PLUGIN(acme_mailer_plugin::AcmeMailerHandler, "acme-mailer");)"),
              std::string::npos)
        << read_generated(dir / "src/plugin.cpp");
    EXPECT_NE(read_generated(dir / "src/handler.hpp").find(R"(return {"AcmeMailerRequested"};)"), std::string::npos);
    EXPECT_NE(read_generated(dir / "tests/handler_test.cpp").find("outbox/sdk/testing.hpp"), std::string::npos);
}

TEST(NewPlugin, AnInvalidNameIsOneLineAndExitCodeTwoAndWritesNothing) {
    outbox::test::TempDir temp;
    for (const std::string& name : std::vector<std::string>{"", "Acme", "acme mailer", "1acme", "acme-", "acme--mailer", "acme_mailer",
                                   "a/../../etc", std::string(64, 'a')}) {
        std::ostringstream out;
        std::ostringstream err;
        EXPECT_EQ(outbox::app::new_plugin_command(name, temp.path() / "x", out, err), 2) << name;
        EXPECT_NE(err.str().find("invalid plugin NAME"), std::string::npos) << err.str();
        EXPECT_EQ(err.str().find('\n'), err.str().size() - 1) << "one line: " << err.str();
        EXPECT_FALSE(fs::exists(temp.path() / "x")) << name;
    }
}

TEST(NewPlugin, ADirectoryThatIsNotEmptyIsRefusedAndLeftAlone) {
    outbox::test::TempDir temp;
    std::ofstream(temp.path() / "keep.txt") << "mine";
    std::ostringstream out;
    std::ostringstream err;
    EXPECT_EQ(outbox::app::new_plugin_command("acme", temp.path(), out, err), 2);
    EXPECT_NE(err.str().find("is not an empty directory"), std::string::npos) << err.str();
    EXPECT_FALSE(fs::exists(temp.path() / "CMakeLists.txt"));
}

}  // namespace
