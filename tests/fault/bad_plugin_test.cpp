// Corrupt, truncated and ABI-mismatched .so files next to a good plugin in the plugin
// directory of a running outboxd: one log line per bad file, and the good one serves.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "fault/fault_fixture.hpp"
#include "support/pg_fixture.hpp"
#include "support/test_host.hpp"

namespace outbox::test::fault {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

std::string bytes_of(const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write(const fs::path& file, const std::string& bytes) {
    std::ofstream out(file, std::ios::binary);
    out << bytes;
}

TEST(BadPlugins, EachBadFileIsRejectedWithOneLineAndTheGoodPluginKeepsServing) {
    TestDatabase db;
    create_scripted_effect_table(db.url());
    const Fleet fleet(db.url(), {{"OUTBOX_POLL_INTERVAL", "100ms"}});
    const fs::path dir = fleet.plugin_dir();  // already holds the good libscripted.so
    const std::string good = bytes_of(dir / "libscripted.so");

    std::string corrupt_header = good;
    corrupt_header.replace(16, 8, 8, '\xff');  // ELF magic intact, type/machine/version garbage
    std::string wrong_class = good;
    wrong_class[4] = 1;  // ELFCLASS32
    std::mt19937 random(7);
    std::string garbage(64 * 1024, '\0');
    for (char& c : garbage) c = static_cast<char>(random());

    const std::map<std::string, std::string> made{
        {"libtruncated.so", good.substr(0, good.size() / 2)},
        {"libheader_only.so", good.substr(0, 40)},
        {"libempty.so", ""},
        {"libgarbage.so", garbage},
        {"libshell_script.so", "#!/bin/sh\necho not a library\n"},
        {"libcorrupt_header.so", corrupt_header},
        {"libwrong_class.so", wrong_class},
    };
    for (const auto& [name, bytes] : made) write(dir / name, bytes);
    const std::map<std::string, std::string> fixtures{
        {"libabi_major_mismatch.so", OUTBOX_FIXTURE_ABI_MAJOR_MISMATCH},
        {"libabi_newer_minor.so", OUTBOX_FIXTURE_ABI_NEWER_MINOR},
        {"libstdlib_mismatch.so", OUTBOX_FIXTURE_STDLIB_MISMATCH},
        {"libno_manifest.so", OUTBOX_FIXTURE_NO_MANIFEST},
        {"libmissing_factory.so", OUTBOX_FIXTURE_MISSING_FACTORY},
    };
    for (const auto& [name, source] : fixtures) fs::copy_file(source, dir / name);
    fs::create_symlink(dir / "gone.so", dir / "libdangling.so");

    publish_many(db.url(), "TestRequested", R"({"db": true})", 200);
    auto host = fleet.start("host");
    ASSERT_TRUE(wait_until([&] { return unsettled(db.url()) == 0; }, 60s)) << fleet.log("host");
    ASSERT_FALSE(host->wait(0ms)) << fleet.log("host");
    const std::string log = fleet.log("host");
    stop_cleanly(fleet, *host, "host");

    std::vector<std::string> bad;
    for (const auto& [name, bytes] : made) bad.push_back(name);
    for (const auto& [name, source] : fixtures) bad.push_back(name);
    bad.emplace_back("libdangling.so");
    for (const auto& name : bad) {
        EXPECT_EQ(count_lines(log, "plugin rejected: " + name + ": "), 1) << name << "\n" << log;
    }
    EXPECT_EQ(count_lines(log, "plugin rejected"), static_cast<int>(bad.size())) << log;
    EXPECT_EQ(count_lines(log, "plugin loaded: handler scripted"), 1) << log;
    expect_final_invariants(db.url(), {}, 200);
}

}  // namespace
}  // namespace outbox::test::fault
