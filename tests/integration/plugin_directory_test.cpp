// Hot plugin operations: add, replace, remove and bad replacements of real .so files in a
// plugin directory, routed by the real runtime against a real PostgreSQL.
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>

#include "app/plugin_routing.hpp"
#include "plugin/plugin_directory.hpp"
#include "support/pg_fixture.hpp"
#include "support/plugin_dir.hpp"
#include "support/temp_dir.hpp"
#include "support/test_host.hpp"

namespace outbox::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

class HotPlugins : public ::testing::Test {
protected:
    void SetUp() override {
        create_scripted_effect_table(db_.url());
        plugins_ = make_plugin_dir(dir_.path());
        fs::create_directory(dir_.path() / "private");
        directory_ = std::make_unique<plugin::PluginDirectory>(plugins_, dir_.path() / "private", plugin::HandlerConfigs{});
        auto options = fast_options(db_.url(), "hot");
        options.concurrency = 4;
        options.batch_size = 4;
        runtime_ = std::make_unique<dispatch::Runtime>(options, std::make_shared<const routing::HandlerSet>(), metrics_);
        runtime_->start();
    }
    void TearDown() override { runtime_->stop(); }

    plugin::DirectoryChange rescan() {
        auto change = directory_->rescan();
        app::report_change(change, metrics_);
        if (change.routing_changed()) {
            runtime_->set_handlers(app::handler_set_from(directory_->current(), [](const std::string&) {
                return config::HandlerSettings{};
            }));
        }
        return change;
    }
    long long count(const std::string& sql) const { return std::stoll(db_.scalar(sql)); }
    /// The runtime is claiming: an event of the scripted plugin (deployed by the test),
    /// published after everything else, completes.
    void prove_claiming() const {
        const auto probe = publish_many(db_.url(), "TestRequested", "{}", 1);
        ASSERT_TRUE(wait_until([&] {
            return count("SELECT count(*) FROM event_publication WHERE event_id = '" + probe[0] + "' AND status = 'COMPLETED'") == 1;
        }, 10s)) << "the host is running and claiming";
    }

    TestDatabase db_;
    TempDir dir_;
    fs::path plugins_;
    metrics::Metrics metrics_;
    std::unique_ptr<plugin::PluginDirectory> directory_;
    std::unique_ptr<dispatch::Runtime> runtime_;
};

TEST_F(HotPlugins, AddedPluginStartsReceivingItsEvents) {
    publish_many(db_.url(), "VersionedRequested", R"({"db": true})", 5);
    deploy_plugin(OUTBOX_FIXTURE_SCRIPTED, plugins_ / "libscripted.so");
    ASSERT_EQ(rescan().added.size(), 1u);
    prove_claiming();
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE event_type = 'VersionedRequested' AND status = 'PENDING'"), 5)
        << "nobody handles it yet";

    deploy_plugin(OUTBOX_FIXTURE_VERSIONED_V1, plugins_ / "libversioned.so");
    const auto change = rescan();
    ASSERT_EQ(change.added.size(), 1u);
    EXPECT_EQ(change.added[0].handler_name, "versioned");
    EXPECT_TRUE(wait_until([&] {
        return count("SELECT count(*) FROM event_publication WHERE event_type = 'VersionedRequested' AND status = 'COMPLETED'") == 5;
    }, 10s));
}

TEST_F(HotPlugins, ReplacingWhileEventsAreInFlightLosesNoneAndRunsNoneTwice) {
    deploy_plugin(OUTBOX_FIXTURE_VERSIONED_V1, plugins_ / "libversioned.so");
    ASSERT_EQ(rescan().added.size(), 1u);
    publish_many(db_.url(), "VersionedRequested", R"({"db": true, "sleep_ms": 250})", 24);
    ASSERT_TRUE(wait_until([&] { return count("SELECT count(*) FROM scripted_effect") >= 4; }, 10s));

    deploy_plugin(OUTBOX_FIXTURE_VERSIONED_V2, plugins_ / "libversioned.so");
    const auto change = rescan();
    ASSERT_EQ(change.replaced.size(), 1u);
    EXPECT_TRUE(change.added.empty());

    ASSERT_TRUE(wait_until([&] { return count("SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'") == 24; },
                           30s));
    EXPECT_EQ(count("SELECT count(*) FROM scripted_effect"), 24) << "each event handled exactly once";
    EXPECT_EQ(count("SELECT count(DISTINCT event_id) FROM scripted_effect"), 24);
    EXPECT_GT(count("SELECT count(*) FROM scripted_effect WHERE handler_name = 'versioned-v1'"), 0);
    EXPECT_GT(count("SELECT count(*) FROM scripted_effect WHERE handler_name = 'versioned-v2'"), 0)
        << "new claims go to the new version";
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE attempt_count <> 1"), 0) << "no event was lost and retried";
    const auto last_v1 = db_.scalar("SELECT max(at) FROM scripted_effect WHERE handler_name = 'versioned-v1'");
    EXPECT_EQ(count("SELECT count(*) FROM scripted_effect WHERE handler_name = 'versioned-v2' AND at < (SELECT min(at) "
                    "FROM scripted_effect WHERE handler_name = 'versioned-v1')"),
              0)
        << "v2 never ran before v1 had started: " << last_v1;
}

TEST_F(HotPlugins, RemovedPluginDrainsAndItsTypesAreNoLongerClaimed) {
    deploy_plugin(OUTBOX_FIXTURE_VERSIONED_V1, plugins_ / "libversioned.so");
    deploy_plugin(OUTBOX_FIXTURE_SCRIPTED, plugins_ / "libscripted.so");
    ASSERT_EQ(rescan().added.size(), 2u);
    publish_many(db_.url(), "VersionedRequested", R"({"db": true, "sleep_ms": 300})", 2);
    ASSERT_TRUE(wait_until([&] { return count("SELECT count(*) FROM event_publication WHERE status = 'PROCESSING'") == 2; },
                           10s));
    fs::remove(plugins_ / "libversioned.so");
    const auto change = rescan();
    ASSERT_EQ(change.removed.size(), 1u);
    EXPECT_EQ(change.removed[0], "versioned");
    ASSERT_TRUE(wait_until([&] { return count("SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'") == 2; },
                           10s))
        << "calls in flight finish on the removed plugin";
    publish_many(db_.url(), "VersionedRequested", R"({"db": true})", 3);
    prove_claiming();
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE event_type = 'VersionedRequested' AND status = 'PENDING'"), 3);
}

TEST_F(HotPlugins, BadReplacementIsRejectedAndTheRunningVersionKeepsServing) {
    deploy_plugin(OUTBOX_FIXTURE_VERSIONED_V1, plugins_ / "libversioned.so");
    ASSERT_EQ(rescan().added.size(), 1u);
    for (const char* bad : {OUTBOX_FIXTURE_ABI_MAJOR_MISMATCH, OUTBOX_FIXTURE_THROWING_CTOR, OUTBOX_FIXTURE_MISSING_FACTORY}) {
        deploy_plugin(bad, plugins_ / "libversioned.so");
        const auto change = rescan();
        EXPECT_FALSE(change.routing_changed()) << bad;
        ASSERT_EQ(change.rejected.size(), 1u) << bad;
        EXPECT_TRUE(rescan().rejected.empty()) << "a bad version is reported once, not on every rescan";
    }
    EXPECT_EQ(metrics_.plugin_load_failures(), 3u);
    publish_many(db_.url(), "VersionedRequested", R"({"db": true})", 3);
    EXPECT_TRUE(wait_until([&] { return count("SELECT count(*) FROM scripted_effect WHERE handler_name = 'versioned-v1'") == 3; },
                           10s));
}

TEST_F(HotPlugins, ADifferentFileWithALoadedHandlerNameIsADuplicate) {
    deploy_plugin(OUTBOX_FIXTURE_VERSIONED_V1, plugins_ / "liba.so");
    ASSERT_EQ(rescan().added.size(), 1u);
    deploy_plugin(OUTBOX_FIXTURE_VERSIONED_V2, plugins_ / "libb.so");
    const auto change = rescan();
    EXPECT_FALSE(change.routing_changed());
    ASSERT_EQ(change.rejected.size(), 1u);
    EXPECT_NE(change.rejected[0].reason.find("duplicate handler_name 'versioned'"), std::string::npos)
        << change.rejected[0].reason;
    EXPECT_NE(change.rejected[0].reason.find("liba.so"), std::string::npos) << change.rejected[0].reason;

    fs::remove(plugins_ / "liba.so");
    const auto after = rescan();
    EXPECT_EQ(after.removed.size(), 1u);
    ASSERT_EQ(after.added.size(), 1u) << "once the first provider is gone the other file is the only one";
    EXPECT_EQ(after.added[0].file.filename(), "libb.so");
}

TEST_F(HotPlugins, UntrustedFilesAndDirectoriesAreRefused) {
    deploy_plugin(OUTBOX_FIXTURE_VERSIONED_V1, plugins_ / "libversioned.so");
    fs::permissions(plugins_ / "libversioned.so", fs::perms::group_write, fs::perm_options::add);
    auto change = rescan();
    ASSERT_EQ(change.rejected.size(), 1u);
    EXPECT_NE(change.rejected[0].reason.find("writable by its group"), std::string::npos) << change.rejected[0].reason;
    EXPECT_TRUE(change.added.empty());

    fs::permissions(plugins_ / "libversioned.so", fs::perms::group_write, fs::perm_options::remove);
    ::utimensat(AT_FDCWD, (plugins_ / "libversioned.so").c_str(), nullptr, 0);  // a new version to look at
    EXPECT_EQ(rescan().added.size(), 1u);

    fs::permissions(plugins_, fs::perms::others_write, fs::perm_options::add);
    change = rescan();
    ASSERT_EQ(change.rejected.size(), 1u);
    EXPECT_NE(change.rejected[0].reason.find("writable by others"), std::string::npos) << change.rejected[0].reason;
    EXPECT_TRUE(rescan().rejected.empty()) << "reported once";
    fs::permissions(plugins_, fs::perms::others_write, fs::perm_options::remove);
}

}  // namespace
}  // namespace outbox::test
