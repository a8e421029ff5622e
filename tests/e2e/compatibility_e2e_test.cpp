// Release compatibility of the real binary (rolling upgrades): what `--version` says, which
// database schemas a host accepts, what it records in the fleet view and what `status` shows.
// The rolling upgrade itself, against the previous release's binary, is scripts/upgrade-test.sh.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <signal.h>
#include <unistd.h>

#include <pqxx/pqxx>

#include "db/embedded_migrations.hpp"
#include "db/migrator.hpp"
#include "support/child_process.hpp"
#include "support/pg_fixture.hpp"
#include "support/plugin_dir.hpp"
#include "support/temp_dir.hpp"
#include "support/test_host.hpp"

namespace outbox::test {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

int needed() { return db::Migrator{}.latest_version(); }

class Compatibility : public ::testing::Test {
protected:
    void SetUp() override {
        plugin_dir_ = scripted_plugin_dir(dir_.path());
    }
    std::map<std::string, std::string> env(const std::string& url) const {
        return {{"OUTBOX_DATABASE_URL", url},
                {"OUTBOX_PLUGIN_DIR", plugin_dir_.string()},
                {"OUTBOX_ADMIN_LISTEN", "off"},
                {"OUTBOX_DATABASE_STARTUP_TIMEOUT", "5s"},
                {"OUTBOX_HOST_ID", "compat-host"}};
    }
    // Records a migration of a newer release in the history, as that release's migrator
    // does: this binary does not have the file.
    void newer_release_applied(int version, int hosts_from) {
        db_.exec("INSERT INTO outbox_schema_history (version, file_name, checksum, duration_ms, "
                 "compatible_with_hosts_from) VALUES (" + std::to_string(version) + ", 'V" + std::to_string(version) +
                 "__from_a_newer_release.sql', repeat('0', 64), 1, " +
                 (hosts_from > 0 ? std::to_string(hosts_from) : std::string("NULL")) + ")");
    }

    TestDatabase db_;
    TempDir dir_;
    fs::path plugin_dir_;
};

TEST_F(Compatibility, VersionPrintsTheReleaseAndTheSchemaItNeeds) {
    const auto [code, output] = run_command({OUTBOXD_BINARY, "--version"}, {}, 10s);
    EXPECT_EQ(code, 0) << output;
    EXPECT_EQ(output, "outboxd " OUTBOXD_VERSION " (needs database schema version " + std::to_string(needed()) + ")\n");
}

TEST_F(Compatibility, HostRefusesASchemaOlderThanItNeedsUntilMigrateRuns) {
    const std::string name = "outbox_compat_old_" + std::to_string(::getpid());
    {
        pqxx::connection admin(server_url());
        pqxx::nontransaction tx(admin);
        tx.exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
        tx.exec("CREATE DATABASE " + name);
    }
    const std::string url = with_database(server_url(), name);
    {
        // The schema of an older release: every migration but the newest.
        std::vector<db::EmbeddedMigration> older = db::embedded_migrations();
        older.pop_back();
        pqxx::connection conn(url);
        db::Migrator{older}.migrate(conn);
    }
    const int older_version = db::Migrator{[] {
                                  auto files = db::embedded_migrations();
                                  files.pop_back();
                                  return files;
                              }()}.latest_version();

    const auto [run_code, run_output] = run_command({OUTBOXD_BINARY, "run"}, env(url), 30s);
    EXPECT_EQ(run_code, 1) << run_output;
    EXPECT_THAT(run_output, HasSubstr("the database schema is at version " + std::to_string(older_version) +
                                      " but this outboxd " OUTBOXD_VERSION " needs version " +
                                      std::to_string(needed()) + ": run `outboxd migrate`"));

    const auto [migrate_code, migrate_output] = run_command({OUTBOXD_BINARY, "migrate"}, env(url), 60s);
    EXPECT_EQ(migrate_code, 0) << migrate_output;
    ChildProcess host({OUTBOXD_BINARY, "run"}, env(url), (dir_.path() / "after-migrate.log").string());
    EXPECT_TRUE(wait_until([&] { return read_file((dir_.path() / "after-migrate.log").string()).find("started as") !=
                                        std::string::npos; },
                           30s))
        << read_file((dir_.path() / "after-migrate.log").string());
    host.signal(SIGTERM);
    EXPECT_EQ(host.wait(30s), std::optional<int>(0));

    pqxx::connection admin(server_url());
    pqxx::nontransaction tx(admin);
    tx.exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
}

TEST_F(Compatibility, HostRefusesASchemaThatNeedsNewerHosts) {
    newer_release_applied(needed() + 1, needed() + 1);

    const auto [code, output] = run_command({OUTBOXD_BINARY, "run"}, env(db_.url()), 30s);

    EXPECT_EQ(code, 1) << output;
    const std::string expected = "the database schema is at version " + std::to_string(needed() + 1) +
                                 " and needs hosts of schema " + std::to_string(needed() + 1) +
                                 " or newer, but this outboxd " OUTBOXD_VERSION " is a host of schema " +
                                 std::to_string(needed()) + ": upgrade this host to a release that supports schema " +
                                 std::to_string(needed() + 1);
    EXPECT_THAT(output, HasSubstr(expected));
    EXPECT_EQ(db_.scalar("SELECT count(*) FROM outbox_host"), "0") << "it did not register";
}

// Expand-only: a newer schema that still accepts hosts of this schema is run on, and the
// host records what it needs and the schema it accepted.
TEST_F(Compatibility, HostRunsOnANewerCompatibleSchemaAndRecordsItsRange) {
    newer_release_applied(needed() + 1, needed());
    const std::string log = (dir_.path() / "host.log").string();
    ChildProcess host({OUTBOXD_BINARY, "run"}, env(db_.url()), log);

    EXPECT_TRUE(wait_until([&] { return db_.scalar("SELECT count(*) FROM outbox_host") == "1"; }, 30s)) << read_file(log);
    EXPECT_EQ(db_.scalar("SELECT version || ' ' || schema_needed || ' ' || schema_supported_max FROM outbox_host"),
              std::string(OUTBOXD_VERSION) + " " + std::to_string(needed()) + " " + std::to_string(needed() + 1));
    host.signal(SIGTERM);
    EXPECT_EQ(host.wait(30s), std::optional<int>(0)) << read_file(log);
}

TEST_F(Compatibility, StatusShowsTheFleetsReleases) {
    db_.exec("INSERT INTO outbox_host (host_id, version, started_at, heartbeat_interval_ms, enabled, schema_needed, "
             "schema_supported_max) VALUES "
             "('new-1', '" OUTBOXD_VERSION "', now(), 60000, true, " + std::to_string(needed()) + ", " +
             std::to_string(needed()) + "), "
             "('new-2', '" OUTBOXD_VERSION "', now(), 60000, true, " + std::to_string(needed()) + ", " +
             std::to_string(needed()) + "), "
             "('old-1', '0.1.0', now(), 60000, true, 0, NULL)");
    db_.exec("INSERT INTO outbox_host (host_id, version, started_at, last_heartbeat_at, heartbeat_interval_ms, "
             "enabled) VALUES ('gone-1', '0.0.9', now(), now() - interval '1 hour', 5000, true)");

    const auto [code, output] = run_command({OUTBOXD_BINARY, "status"}, env(db_.url()), 20s);

    EXPECT_EQ(code, 0) << output;
    EXPECT_THAT(output, HasSubstr("releases: " OUTBOXD_VERSION " on 2 live hosts (schema " + std::to_string(needed()) +
                                  "); 0.1.0 on 1 live host (schema unrecorded)\n"));
    EXPECT_THAT(output, HasSubstr(OUTBOXD_VERSION " (" + std::to_string(needed()) + ")"));
    EXPECT_THAT(output, HasSubstr("0.1.0 (?)"));
    EXPECT_THAT(output, HasSubstr("0.0.9 (?)")) << "gone hosts are listed, not counted";
}

}  // namespace
}  // namespace outbox::test
