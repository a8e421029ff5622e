// The migration runner against a real PostgreSQL: fresh databases, reruns, concurrent
// hosts, edited files, unknown versions and failing statements.

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "db/embedded_migrations.hpp"
#include "db/migrator.hpp"
#include "support/pg_fixture.hpp"
#include "support/test_roles.hpp"

namespace {

// Advisory locks held in the test's own database: other tiers run beside this one on the
// same server, and their hosts hold locks of their own.
constexpr const char* kAdvisoryLocksHere =
    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
    "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())";

using outbox::db::EmbeddedMigration;
using outbox::db::MigrateOptions;
using outbox::db::MigrationError;
using outbox::db::MigrationRefused;
using outbox::db::parse_migration_header;
using outbox::db::Migrator;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// TestDatabase is already migrated; these tests need a database with nothing in it.
class EmptyDatabase {
public:
    EmptyDatabase() : name_("outbox_empty_" + std::to_string(::getpid()) + "_" + std::to_string(++counter_)) {
        admin("CREATE DATABASE " + name_);
        url_ = outbox::test::with_database(outbox::test::server_url(), name_);
    }
    ~EmptyDatabase() {
        try {
            admin("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
        } catch (...) {
        }
    }
    EmptyDatabase(const EmptyDatabase&) = delete;
    EmptyDatabase& operator=(const EmptyDatabase&) = delete;

    [[nodiscard]] const std::string& url() const { return url_; }
    [[nodiscard]] std::string scalar(const std::string& sql) const {
        pqxx::connection conn{url_};
        pqxx::read_transaction tx{conn};
        return tx.exec1(sql)[0].as<std::string>();
    }

private:
    static void admin(const std::string& sql) {
        pqxx::connection conn{outbox::test::server_url()};
        pqxx::nontransaction tx{conn};
        tx.exec0(sql);
    }

    static inline std::atomic<int> counter_{0};
    std::string name_;
    std::string url_;
};

const std::vector<EmbeddedMigration>& real() { return outbox::db::embedded_migrations(); }

std::vector<EmbeddedMigration> real_plus(std::vector<EmbeddedMigration> extra) {
    std::vector<EmbeddedMigration> all = real();
    all.insert(all.end(), extra.begin(), extra.end());
    return all;
}

std::string message_of(const std::function<void()>& action) {
    try {
        action();
    } catch (const MigrationError& e) {
        return e.what();
    }
    ADD_FAILURE() << "expected a MigrationError";
    return {};
}

// Test-only migrations numbered far above the real ones, so the tests keep meaning the
// same thing as real migrations are added.
const EmbeddedMigration kV2{"V1001__add_widget.sql", "CREATE TABLE widget (id int PRIMARY KEY);"};
const EmbeddedMigration kV3{"V1002__add_gadget.sql", "CREATE TABLE gadget (id int PRIMARY KEY);"};

int real_latest() { return Migrator{}.latest_version(); }

std::vector<std::string> real_file_names() {
    std::vector<std::string> names;
    for (const auto& m : outbox::db::embedded_migrations()) names.emplace_back(m.file_name);
    return names;
}

TEST(Migrator, RejectsMalformedFileNames) {
    for (const char* name : {"V1_schema.sql", "1__schema.sql", "V__schema.sql", "V0__schema.sql", "V1__.sql",
                             "V1__schema.txt", "Vx__schema.sql", "V1__sch ema.sql", "V99999999999__schema.sql"}) {
        const std::string message = message_of([&] { Migrator{{{name, "SELECT 1;"}}}; });
        EXPECT_THAT(message, HasSubstr(name));
        EXPECT_THAT(message, HasSubstr("V<n>__<name>.sql"));
    }
}

TEST(Migrator, RejectsDuplicateVersions) {
    const std::string message =
        message_of([] { Migrator{{{"V1__a.sql", "SELECT 1;"}, {"V01__b.sql", "SELECT 1;"}}}; });
    EXPECT_THAT(message, HasSubstr("V1__a.sql"));
    EXPECT_THAT(message, HasSubstr("V01__b.sql"));
}

TEST(Migrate, FreshDatabaseGetsEveryMigrationWithChecksums) {
    const EmptyDatabase db;
    pqxx::connection conn{db.url()};

    const auto applied = Migrator{}.migrate(conn);

    ASSERT_EQ(applied.size(), real().size());
    EXPECT_EQ(applied.front().version, 1);
    EXPECT_EQ(applied.front().file_name, "V1__outbox_schema.sql");
    EXPECT_EQ(db.scalar("SELECT count(*) FROM outbox_schema_history"), std::to_string(real().size()));
    EXPECT_EQ(db.scalar("SELECT file_name FROM outbox_schema_history WHERE version = 1"), "V1__outbox_schema.sql");
    EXPECT_EQ(db.scalar("SELECT bool_and(checksum ~ '^[0-9a-f]{64}$' AND duration_ms >= 0 AND applied_at <= now()) "
                        "FROM outbox_schema_history"),
              "t");
    EXPECT_EQ(db.scalar("SELECT to_regclass('event_publication') IS NOT NULL"), "t");
    EXPECT_EQ(db.scalar(kAdvisoryLocksHere), "0")
        << "the migration lock must be released";
}

TEST(Migrate, ChecksumIsTheSha256OfTheFileText) {
    const EmptyDatabase db;
    pqxx::connection conn{db.url()};
    Migrator{{{"V1__tiny.sql", "CREATE TABLE tiny ();"}}}.migrate(conn);
    // sha256 of the UTF-8 bytes of "CREATE TABLE tiny ();", computed independently of the migrator.
    EXPECT_EQ(db.scalar("SELECT checksum = encode(sha256('CREATE TABLE tiny ();'::bytea), 'hex') "
                        "FROM outbox_schema_history"),
              "t");
}

TEST(Migrate, SecondRunAppliesNothing) {
    const EmptyDatabase db;
    pqxx::connection conn{db.url()};
    ASSERT_FALSE(Migrator{}.migrate(conn).empty());
    const std::string before = db.scalar("SELECT string_agg(version || ':' || applied_at, ',') FROM outbox_schema_history");

    EXPECT_TRUE(Migrator{}.migrate(conn).empty());
    EXPECT_EQ(db.scalar("SELECT string_agg(version || ':' || applied_at, ',') FROM outbox_schema_history"), before);
}

TEST(Migrate, NewFileIsAppliedOnTopOfAnAppliedSchema) {
    const EmptyDatabase db;
    pqxx::connection conn{db.url()};
    Migrator{}.migrate(conn);

    const auto applied = Migrator{real_plus({kV2})}.migrate(conn);

    ASSERT_EQ(applied.size(), 1U);
    EXPECT_EQ(applied[0].version, 1001);
    EXPECT_EQ(applied[0].file_name, "V1001__add_widget.sql");
    EXPECT_EQ(db.scalar("SELECT to_regclass('widget') IS NOT NULL"), "t");
}

TEST(Migrate, TwoHostsMigratingAtOnceApplyEachVersionOnce) {
    const EmptyDatabase db;
    const Migrator migrator{real_plus({kV2, kV3})};
    std::vector<outbox::db::AppliedMigration> applied_a;
    std::vector<outbox::db::AppliedMigration> applied_b;
    std::string error_a;
    std::string error_b;
    auto run = [&](std::vector<outbox::db::AppliedMigration>& applied, std::string& error) {
        try {
            pqxx::connection conn{db.url()};
            applied = migrator.migrate(conn);
        } catch (const std::exception& e) {
            error = e.what();
        }
    };

    std::thread a{run, std::ref(applied_a), std::ref(error_a)};
    std::thread b{run, std::ref(applied_b), std::ref(error_b)};
    a.join();
    b.join();

    EXPECT_EQ(error_a, "");
    EXPECT_EQ(error_b, "");
    EXPECT_EQ(applied_a.size() + applied_b.size(), real().size() + 2)
        << "one host applies everything, the other waits for the lock and finds nothing to do";
    EXPECT_TRUE(applied_a.empty() || applied_b.empty());
    EXPECT_EQ(db.scalar("SELECT count(*) FROM outbox_schema_history"), std::to_string(real().size() + 2));
}

TEST(Migrate, AMigrationLockHeldTooLongIsAnErrorNamingItsHolder) {
    const EmptyDatabase db;
    pqxx::connection holder{db.url()};
    pqxx::nontransaction hold{holder};
    const int holder_pid = hold.exec1("SELECT pg_backend_pid()")[0].as<int>();
    hold.exec("SELECT pg_advisory_lock(x'6f7574626f78'::bigint)");

    pqxx::connection conn{db.url()};
    outbox::db::MigrateOptions options;
    options.lock_wait = std::chrono::milliseconds{300};
    try {
        Migrator{real()}.migrate(conn, {}, options);
        FAIL() << "a held lock must not be waited for past lock_wait";
    } catch (const outbox::db::MigrationError& e) {
        EXPECT_NE(std::string(e.what()).find("backend pid " + std::to_string(holder_pid)), std::string::npos) << e.what();
    }
    pqxx::nontransaction check{conn};
    EXPECT_FALSE(check.exec1("SELECT to_regclass('event_publication') IS NOT NULL")[0].as<bool>())
        << "nothing is applied without the lock";
}

TEST(Migrate, EditedAppliedMigrationIsRefused) {
    const EmptyDatabase db;
    pqxx::connection conn{db.url()};
    Migrator{}.migrate(conn);

    std::vector<EmbeddedMigration> edited = real();
    const std::string changed_sql = std::string(edited[0].sql) + "\n-- an innocent-looking edit\n";
    edited[0].sql = changed_sql;
    const Migrator migrator{edited};

    const std::string message = message_of([&] { migrator.migrate(conn); });
    EXPECT_THAT(message, HasSubstr("migration V1__outbox_schema.sql was edited after it was applied"));
    EXPECT_THAT(message, HasSubstr("add a new migration instead"));
    EXPECT_THAT(message_of([&] { migrator.status(conn); }), HasSubstr("V1__outbox_schema.sql was edited"));
    EXPECT_EQ(db.scalar(kAdvisoryLocksHere), "0")
        << "the migration lock must be released on the error path";
}

TEST(Migrate, DatabaseNewerThanThisBinaryIsRefused) {
    const EmptyDatabase db;
    pqxx::connection conn{db.url()};
    Migrator{real_plus({kV2})}.migrate(conn);

    const std::string message = message_of([&] { Migrator{}.migrate(conn); });

    EXPECT_THAT(message, HasSubstr("database is newer than this outboxd"));
    EXPECT_THAT(message, HasSubstr("V1001__add_widget.sql"));
}

TEST(Migrate, NewFileBelowAnAppliedVersionIsRefused) {
    const EmptyDatabase db;
    pqxx::connection conn{db.url()};
    Migrator{real_plus({kV3})}.migrate(conn);

    const std::string message = message_of([&] { Migrator{real_plus({kV2, kV3})}.migrate(conn); });

    EXPECT_THAT(message, HasSubstr("V1001__add_widget.sql"));
    EXPECT_EQ(db.scalar("SELECT to_regclass('widget') IS NULL"), "t");
}

TEST(Migrate, FailingStatementRollsBackItsFileAndNamesIt) {
    const EmptyDatabase db;
    pqxx::connection conn{db.url()};
    const EmbeddedMigration broken{"V1001__broken.sql",
                                   "CREATE TABLE half_done (id int);\nSELECT no_such_column FROM half_done;"};

    const std::string message = message_of([&] { Migrator{real_plus({broken})}.migrate(conn); });

    EXPECT_THAT(message, HasSubstr("V1001__broken.sql"));
    EXPECT_THAT(message, HasSubstr("SQLSTATE 42703")) << "undefined_column";
    EXPECT_THAT(message, ::testing::Not(HasSubstr("no_such_column")))
        << "PostgreSQL's message text (which can quote values) stays out of logs";
    EXPECT_THAT(message, ::testing::Not(HasSubstr("\n"))) << "one line";
    EXPECT_EQ(db.scalar("SELECT to_regclass('half_done') IS NULL"), "t") << "the failed file's transaction rolled back";
    EXPECT_EQ(db.scalar("SELECT max(version) FROM outbox_schema_history"), std::to_string(real_latest()))
        << "earlier files stay applied";
    EXPECT_EQ(db.scalar(kAdvisoryLocksHere), "0");
    EXPECT_TRUE(Migrator{}.migrate(conn).empty()) << "the connection is still usable";
}

TEST(Migrate, StatusOfAnEmptyDatabaseListsEverythingPendingAndChangesNothing) {
    const EmptyDatabase db;
    pqxx::connection conn{db.url()};

    const auto status = Migrator{real_plus({kV2})}.status(conn);

    EXPECT_EQ(status.applied_version, 0);
    EXPECT_EQ(status.latest_version, 1001);
    auto expected = real_file_names();
    expected.emplace_back("V1001__add_widget.sql");
    EXPECT_EQ(status.pending, expected);
    EXPECT_EQ(db.scalar("SELECT to_regclass('outbox_schema_history') IS NULL"), "t") << "status() must not write";
}

TEST(Migrate, StatusReportsPendingFiles) {
    const EmptyDatabase db;
    pqxx::connection conn{db.url()};
    Migrator{}.migrate(conn);

    const auto pending = Migrator{real_plus({kV2, kV3})}.status(conn);
    EXPECT_EQ(pending.applied_version, real_latest());
    EXPECT_EQ(pending.latest_version, 1002);
    EXPECT_THAT(pending.pending, ElementsAre("V1001__add_widget.sql", "V1002__add_gadget.sql"));

    const auto current = Migrator{}.status(conn);
    EXPECT_EQ(current.applied_version, current.latest_version);
    EXPECT_TRUE(current.pending.empty());
}

TEST(Migrate, TestDatabasesAreClonedFromAMigratedTemplate) {
    const outbox::test::TestDatabase db;
    pqxx::connection conn{db.url()};
    EXPECT_TRUE(Migrator{}.status(conn).pending.empty());
    EXPECT_EQ(db.scalar("SELECT count(*) FROM event_publication"), "0");
}

// --- Expand, then contract: migration headers and the fleet check (rolling upgrades) ---

// Every file in migrations/ (the directory, not only what the build embedded) says in its
// header whether it can be applied while the previous release's hosts run. Files up to
// kLastVersionWithoutHeader were released before the convention and cannot change.
TEST(MigrationFiles, EveryFileDeclaresWhetherItIsOnline) {
    const std::filesystem::path dir = std::filesystem::path(OUTBOX_SOURCE_DIR) / "migrations";
    int checked = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        const std::string name = entry.path().filename().string();
        SCOPED_TRACE(name);
        std::ifstream in(entry.path());
        const std::string sql{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
        const int version = std::atoi(name.c_str() + 1);
        ASSERT_TRUE(name.starts_with("V") && name.ends_with(".sql") && version > 0)
            << "migrations/ holds only V<n>__<name>.sql files";
        const auto header = parse_migration_header(name, sql);  // throws on a malformed header line
        ++checked;
        if (version <= outbox::db::kLastVersionWithoutHeader) continue;
        EXPECT_TRUE(header.has_online) << "migrations/" << name
                                       << " needs a header line '-- online: yes' or '-- online: no — <why>' "
                                          "among its leading comment lines (see docs/operations.md, Rolling upgrades)";
        if (header.has_online && !header.online) {
            EXPECT_FALSE(header.offline_reason.empty()) << name;
        }
        EXPECT_LE(header.hosts_from, version) << name << ": compatible-with-hosts-from names a future schema";
    }
    EXPECT_EQ(checked, static_cast<int>(real().size())) << "every file in migrations/ is embedded";
}

TEST(MigrationFiles, HeaderForms) {
    const auto online = parse_migration_header("V1__a.sql", "-- online: yes\n-- what it does\nCREATE TABLE a ();");
    EXPECT_TRUE(online.has_online);
    EXPECT_TRUE(online.online);
    EXPECT_EQ(online.hosts_from, 0);

    const auto offline = parse_migration_header(
        "V1__a.sql", "-- Drops a column.\n-- online: no \u2014 old hosts still write it\n"
                     "-- compatible-with-hosts-from: 12\nALTER TABLE a DROP COLUMN b;");
    EXPECT_TRUE(offline.has_online);
    EXPECT_FALSE(offline.online);
    EXPECT_EQ(offline.offline_reason, "old hosts still write it");
    EXPECT_EQ(offline.hosts_from, 12);

    EXPECT_FALSE(parse_migration_header("V1__a.sql", "CREATE TABLE a ();\n-- online: yes").has_online)
        << "the header is the leading comment block only";
    for (const char* bad : {"-- online: maybe\n", "-- online: no\n", "-- online: nope, really\n",
                            "-- compatible-with-hosts-from: x\n", "-- compatible-with-hosts-from: 0\n"}) {
        SCOPED_TRACE(bad);
        EXPECT_THAT(message_of([&] { parse_migration_header("V9__bad.sql", bad); }), HasSubstr("V9__bad.sql"));
    }
}

class FleetDuringMigration : public ::testing::Test {
protected:
    // A host row as the fleet registry writes it; live unless `stopped`.
    void register_host(const std::string& id, const std::string& release, int schema_needed, bool stopped = false) {
        db_.exec("INSERT INTO outbox_host (host_id, version, started_at, heartbeat_interval_ms, stopped_at, enabled, "
                 "schema_needed) VALUES ('" + id + "', '" + release + "', now(), 60000, " +
                 (stopped ? "now()" : "NULL") + ", true, " + std::to_string(schema_needed) + ")");
    }
    bool applied(int version) const {
        return db_.scalar("SELECT count(*) FROM outbox_schema_history WHERE version = " + std::to_string(version)) == "1";
    }

    outbox::test::TestDatabase db_;
    pqxx::connection conn_{db_.url()};
    const EmbeddedMigration offline_{"V1001__rewrite_events.sql",
                                     "-- online: no \u2014 rewrites event_publication under an exclusive lock\n"
                                     "CREATE TABLE rewritten ();"};
};

TEST_F(FleetDuringMigration, OfflineMigrationIsRefusedWhileHostsOfAnOlderReleaseAreLive) {
    register_host("old-host-1", "0.1.0", 0);  // a release that does not record its schema
    register_host("old-host-2", "0.1.0", 0);

    std::string message;
    try {
        Migrator{real_plus({offline_})}.migrate(conn_);
        ADD_FAILURE() << "expected MigrationRefused";
    } catch (const MigrationRefused& e) {
        message = e.what();
    }
    EXPECT_THAT(message, HasSubstr("V1001__rewrite_events.sql is not online (rewrites event_publication under an "
                                   "exclusive lock)"));
    EXPECT_THAT(message, HasSubstr("2 live host(s)"));
    EXPECT_THAT(message, HasSubstr("old-host-1 (release 0.1.0, schema unrecorded)"));
    EXPECT_THAT(message, HasSubstr("--offline"));
    EXPECT_THAT(message, ::testing::Not(HasSubstr("\n"))) << "one line";
    EXPECT_FALSE(applied(1001)) << "nothing is applied";
    EXPECT_EQ(db_.scalar("SELECT to_regclass('rewritten') IS NULL"), "t");

    const auto done = Migrator{real_plus({offline_})}.migrate(conn_, {}, MigrateOptions{.allow_offline = true, .lock_wait = std::nullopt});
    ASSERT_EQ(done.size(), 1U) << "--offline applies it";
    EXPECT_TRUE(applied(1001));
}

TEST_F(FleetDuringMigration, OfflineMigrationRunsWhenOnlyStoppedOrNewerHostsAreRegistered) {
    register_host("stopped-old", "0.1.0", 0, /*stopped=*/true);
    register_host("newer", "9.0.0", 1001);
    db_.exec("INSERT INTO outbox_host (host_id, version, started_at, last_heartbeat_at, heartbeat_interval_ms, enabled) "
             "VALUES ('gone-old', '0.1.0', now(), now() - interval '10 minutes', 5000, true)");

    EXPECT_EQ(Migrator{real_plus({offline_})}.migrate(conn_).size(), 1U);
    EXPECT_TRUE(applied(1001));
}

TEST_F(FleetDuringMigration, OnlineMigrationRunsWhileOlderHostsAreLive) {
    register_host("old-host", "0.1.0", 0);
    const EmbeddedMigration online{"V1001__add_table.sql", "-- online: yes\nCREATE TABLE added ();"};
    EXPECT_EQ(Migrator{real_plus({online})}.migrate(conn_).size(), 1U);
}

TEST_F(FleetDuringMigration, FileWithoutHeaderAboveTheReleasedOnesIsTreatedAsOffline) {
    register_host("old-host", "0.1.0", 0);
    EXPECT_THROW(Migrator{real_plus({kV2})}.migrate(conn_), MigrationRefused);
    EXPECT_FALSE(applied(1001));
}

// A contracting file: online for hosts that need schema 1001 or newer, and recorded so that
// older hosts refuse to start afterwards (status().hosts_from).
TEST_F(FleetDuringMigration, ContractingMigrationWaitsForHostsBelowItAndIsRecorded) {
    const EmbeddedMigration contract{"V1002__drop_old_function.sql",
                                     "-- online: yes\n-- compatible-with-hosts-from: 1001\nCREATE TABLE contracted ();"};
    const EmbeddedMigration expand{"V1001__expand.sql", "-- online: yes\nCREATE TABLE expanded ();"};
    register_host("host-at-1001", "0.3.0", 1001);
    register_host("host-at-12", "0.2.0", 12);

    std::string message;
    try {
        Migrator{real_plus({expand, contract})}.migrate(conn_);
    } catch (const MigrationRefused& e) {
        message = e.what();
    }
    EXPECT_THAT(message, HasSubstr("V1002__drop_old_function.sql leaves only hosts that need schema 1001 or newer"));
    EXPECT_THAT(message, HasSubstr("host-at-12 (release 0.2.0, schema 12)"));
    EXPECT_THAT(message, ::testing::Not(HasSubstr("host-at-1001")));
    EXPECT_FALSE(applied(1001)) << "refused before anything is applied";
    EXPECT_EQ(Migrator{real_plus({expand, contract})}.status(conn_).hosts_from, 0);

    db_.exec("UPDATE outbox_host SET stopped_at = now() WHERE host_id = 'host-at-12'");
    EXPECT_EQ(Migrator{real_plus({expand, contract})}.migrate(conn_).size(), 2U);
    EXPECT_EQ(db_.scalar("SELECT compatible_with_hosts_from FROM outbox_schema_history WHERE version = 1002"), "1001");
    EXPECT_EQ(Migrator{}.status(conn_).hosts_from, 1001) << "a host of this release reads it without knowing the file";
}

}  // namespace

namespace {

// A file marked no-transaction runs outside a transaction: CREATE INDEX CONCURRENTLY works,
// its history row is written, and the session's search_path is what it was before.
TEST(Migrate, NoTransactionFileBuildsAnIndexConcurrently) {
    const EmptyDatabase db;
    pqxx::connection conn{db.url()};
    Migrator{}.migrate(conn);
    const std::string path_before = pqxx::nontransaction(conn).exec1("SHOW search_path")[0].as<std::string>();
    const EmbeddedMigration concurrent{"V1001__concurrent_index.sql",
                                       "-- outboxd: no-transaction\n"
                                       "-- a comment; with a semicolon\n"
                                       "CREATE INDEX CONCURRENTLY IF NOT EXISTS widget_idx\n"
                                       "    ON event_publication (updated_at);\n"
                                       "CREATE INDEX CONCURRENTLY IF NOT EXISTS widget2_idx ON event_publication (version);\n"};

    const auto applied = Migrator{real_plus({concurrent})}.migrate(conn);

    ASSERT_EQ(applied.size(), 1U);
    EXPECT_EQ(db.scalar("SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                        "WHERE c.relname IN ('widget_idx', 'widget2_idx') AND i.indisvalid"),
              "2");
    EXPECT_EQ(db.scalar("SELECT count(*) FROM outbox_schema_history WHERE version = 1001"), "1");
    EXPECT_EQ(pqxx::nontransaction(conn).exec1("SHOW search_path")[0].as<std::string>(), path_before);
    // The same statements without the marker run in a transaction, which PostgreSQL refuses.
    const EmbeddedMigration unmarked{"V1002__unmarked.sql",
                                     "CREATE INDEX CONCURRENTLY IF NOT EXISTS widget3_idx ON event_publication (status);"};
    EXPECT_THAT(message_of([&] { Migrator{real_plus({concurrent, unmarked})}.migrate(conn); }),
                HasSubstr("V1002__unmarked.sql failed and was rolled back"));
}

// A concurrent build that fails leaves an INVALID index behind; the next migrate drops it
// and builds it again instead of letting IF NOT EXISTS keep the broken one.
TEST(Migrate, FailedConcurrentIndexBuildIsRetriedCleanly) {
    const EmptyDatabase db;
    pqxx::connection conn{db.url()};
    Migrator{}.migrate(conn);
    pqxx::nontransaction(conn).exec("CREATE TABLE gizmo (x integer); INSERT INTO gizmo VALUES (1), (1)");
    const EmbeddedMigration unique{"V1001__unique_gizmo.sql",
                                   "-- outboxd: no-transaction\n"
                                   "CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS gizmo_x_idx ON gizmo (x);\n"};
    const Migrator migrator{real_plus({unique})};

    EXPECT_THAT(message_of([&] { migrator.migrate(conn); }),
                HasSubstr("V1001__unique_gizmo.sql failed (it runs outside a transaction"));
    EXPECT_EQ(db.scalar("SELECT count(*) FROM outbox_schema_history WHERE version = 1001"), "0");
    ASSERT_EQ(db.scalar("SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                        "WHERE c.relname = 'gizmo_x_idx'"),
              "f");

    pqxx::nontransaction(conn).exec("DELETE FROM gizmo WHERE ctid = (SELECT max(ctid) FROM gizmo)");
    ASSERT_EQ(migrator.migrate(conn).size(), 1U);
    EXPECT_EQ(db.scalar("SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                        "WHERE c.relname = 'gizmo_x_idx'"),
              "t");
    EXPECT_EQ(db.scalar("SELECT count(*) FROM outbox_schema_history WHERE version = 1001"), "1");
}

// Functions created by a migration capture the migrator's path (the target schema, pg_temp
// last; pg_catalog is searched first because it is not named), not the session's.
TEST(Migrate, FunctionsCaptureTheTargetSchemaWithPgTempLast) {
    const EmptyDatabase db;
    pqxx::connection conn{db.url()};
    pqxx::nontransaction(conn).exec("CREATE SCHEMA other; SET search_path = public, other");
    Migrator{}.migrate(conn);
    EXPECT_EQ(db.scalar("SELECT array_to_string(proconfig, ';') FROM pg_proc WHERE proname = 'outbox_fence'"),
              "search_path=public, pg_temp");
}

// V19 replaces outbox_publish with a six-parameter function (the old one renamed away: a second
// overload would make 5-argument calls ambiguous). A role granted EXECUTE on the old one by
// hand, not through migrate's stored roles, may still publish; PUBLIC still may not.
TEST(Migrate, DelayedEventsMigrationKeepsTheGrantsOfOutboxPublish) {
    const outbox::test::TestRoles roles;
    const EmptyDatabase db;
    pqxx::connection conn{db.url()};
    std::vector<EmbeddedMigration> before;
    for (const auto& m : real()) {
        if (std::stoi(std::string(m.file_name.substr(1))) < 19) before.push_back(m);
    }
    Migrator{before}.migrate(conn);
    pqxx::nontransaction(conn).exec0("GRANT EXECUTE ON FUNCTION outbox_publish(text, text, jsonb, text, text) TO " +
                                     roles.other);
    Migrator{}.migrate(conn);

    EXPECT_EQ(db.scalar("SELECT count(*) FROM pg_proc WHERE proname = 'outbox_publish'"), "1");
    const std::string fn = "'outbox_publish(text, text, jsonb, text, text, timestamptz, text, text)'";
    EXPECT_EQ(db.scalar("SELECT has_function_privilege('" + roles.other + "', " + fn + ", 'EXECUTE')"), "t");
    EXPECT_EQ(db.scalar("SELECT has_function_privilege('" + roles.publisher + "', " + fn + ", 'EXECUTE')"), "f")
        << "PUBLIC got EXECUTE back";
    pqxx::work tx{conn};
    tx.exec0("SET LOCAL ROLE " + roles.other);
    EXPECT_NO_THROW(tx.exec1("SELECT outbox_publish('acme', 'Granted', '{}', 'k', 'd')"))
        << "a five-argument call by a granted role, with no privilege on any table (SECURITY DEFINER)";
}

}  // namespace
