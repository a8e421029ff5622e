// The examples of README.md and docs/*.md, as scripts/doc_examples.py extracted them at
// build time: every SQL block runs with psql in a fresh migrated database, every C++ block
// compiles against the SDK, and the README's plugin, built as a real .so, completes the
// event the README's SQL example publishes in a host built by app::Host.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "support/child_process.hpp"
#include "support/pg_fixture.hpp"
#include "support/test_host.hpp"

namespace outbox::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// The extracted blocks with this extension, one file per block (named <page>__L<line>).
std::vector<fs::path> examples(const std::string& extension) {
    std::vector<fs::path> found;
    for (const auto& entry : fs::directory_iterator(OUTBOX_DOC_EXAMPLES_DIR)) {
        const std::string name = entry.path().filename().string();
        if (entry.path().extension() == extension && name.find("__L") != std::string::npos) {
            found.push_back(entry.path());
        }
    }
    std::sort(found.begin(), found.end());
    return found;
}

// "README.md__L113.sql" -> "README.md:113", the place to fix.
std::string origin(const fs::path& file) {
    std::string name = file.stem().string();
    const auto at = name.rfind("__L");
    std::string page = name.substr(0, at);
    if (page.rfind("docs_", 0) == 0) page = "docs/" + page.substr(5);
    return page + ":" + name.substr(at + 3);
}

// Inside a transaction that is rolled back: an example that creates roles (cluster-wide,
// unlike the fresh database) runs again in the next run of the suite on the same server.
std::pair<int, std::string> run_psql(const std::string& url, const fs::path& file) {
    return run_command({OUTBOX_PSQL, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", "BEGIN", "-f", file.string(),
                        "-c", "ROLLBACK"},
                       {}, 60s);
}

TEST(DocsExamples, EverySqlExampleRunsInAFreshMigratedDatabase) {
    const auto files = examples(".sql");
    ASSERT_FALSE(files.empty()) << "no SQL example extracted into " << OUTBOX_DOC_EXAMPLES_DIR;
    for (const auto& file : files) {
        TestDatabase db;
        const auto [code, output] = run_psql(db.url(), file);
        EXPECT_EQ(code, 0) << "the SQL example at " << origin(file) << " fails:\n" << output;
    }
}

TEST(DocsExamples, EveryCppExampleCompilesAgainstTheSdk) {
    const auto files = examples(".cpp");
    ASSERT_FALSE(files.empty()) << "no C++ example extracted into " << OUTBOX_DOC_EXAMPLES_DIR;
    for (const auto& file : files) {
        const auto [code, output] =
            run_command({OUTBOX_CXX_COMPILER, "-std=c++20", "-c", "-fPIC", "-o", "/dev/null", "-Wall", "-Wextra",
                         "-Wpedantic", "-Werror", "-I", OUTBOX_SDK_INCLUDE_DIR, "-x", "c++", file.string()},
                        {}, 120s);
        EXPECT_EQ(code, 0) << "the C++ example at " << origin(file) << " does not compile:\n" << output;
    }
}

TEST(DocsExamples, ReadmePluginCompletesTheEventTheReadmePublishes) {
    TestDatabase db;
    const auto [code, output] = run_psql(db.url(), fs::path(OUTBOX_DOC_EXAMPLES_DIR) / "readme-publish.sql");
    ASSERT_EQ(code, 0) << output;
    const std::string published = db.scalar("SELECT event_id FROM event_publication WHERE event_type = 'OrderPlaced'");
    // The example's own failure path: without order_id it asks for review.
    const std::string incomplete = publish_many(db.url(), "OrderPlaced", R"({"total_cents": 100})", 1).front();

    TestHost host(fast_options(db.url(), "docs-readme-host"), {OUTBOX_DOCS_README_PLUGIN});
    host.start();
    const auto status_of = [&](const std::string& id) {
        return db.scalar("SELECT status || ' ' || coalesce(last_error_code, '-') FROM event_publication "
                         "WHERE event_id = '" + id + "'");
    };
    EXPECT_TRUE(wait_until([&] { return status_of(published) == "COMPLETED -"; }, 30s)) << status_of(published);
    EXPECT_TRUE(wait_until([&] { return status_of(incomplete) == "REVIEW_REQUIRED MISSING_ORDER_ID"; }, 30s))
        << status_of(incomplete);
    EXPECT_TRUE(host.stop());
    // Completed in its first attempt: the status records that its handler consumed it.
    EXPECT_EQ(db.scalar("SELECT coalesce(string_agg(handler_name, ','), 'none') FROM event_consumption "
                        "WHERE event_id = '" + published + "'"),
              "none");
}

}  // namespace
}  // namespace outbox::test
