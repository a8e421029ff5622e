// The three roles of docs/security.md end to end: the schema owner runs `outboxd migrate
// --runtime-role R --publisher-role P`, publishers connect as P, and `outboxd run` connects
// as R and processes every event with a real plugin that writes through ctx.db().

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include <pqxx/pqxx>
#include <signal.h>

#include "support/child_process.hpp"
#include "support/pg_fixture.hpp"
#include "support/plugin_dir.hpp"
#include "support/temp_dir.hpp"
#include "support/test_host.hpp"
#include "support/test_roles.hpp"

namespace outbox::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// A database nothing has migrated yet, owned by the test server's user (the migration owner).
class FreshDatabase {
public:
    FreshDatabase() : name_("outbox_roles_e2e_" + std::to_string(::getpid())) {
        admin("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
        admin("CREATE DATABASE " + name_);
        url_ = with_database(server_url(), name_);
    }
    ~FreshDatabase() {
        try {
            admin("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
        } catch (...) {
        }
    }
    FreshDatabase(const FreshDatabase&) = delete;
    FreshDatabase& operator=(const FreshDatabase&) = delete;
    [[nodiscard]] const std::string& url() const { return url_; }
    [[nodiscard]] long long count(const std::string& sql) const {
        pqxx::connection conn{url_};
        pqxx::read_transaction tx{conn};
        return tx.exec1(sql)[0].as<long long>();
    }

private:
    static void admin(const std::string& sql) {
        pqxx::connection conn{server_url()};
        pqxx::nontransaction tx{conn};
        tx.exec0(sql);
    }
    std::string name_;
    std::string url_;
};

TEST(DbRolesE2e, OwnerMigratesPublisherPublishesRuntimeRoleProcessesEverything) {
    const TestRoles roles;
    const FreshDatabase db;
    const TempDir dir;
    const fs::path plugin_dir = scripted_plugin_dir(dir.path());
    const auto owner_env = outboxd_env(db.url(), plugin_dir);

    const auto [missing_code, missing_output] =
        run_command({OUTBOXD_BINARY, "migrate", "--runtime-role", "outbox_no_such_role"}, owner_env, 60s);
    EXPECT_EQ(missing_code, 2) << missing_output;
    EXPECT_NE(missing_output.find("role 'outbox_no_such_role' (--runtime-role) does not exist"), std::string::npos)
        << missing_output;
    EXPECT_EQ(std::count(missing_output.begin(), missing_output.end(), '\n'), 1) << missing_output;

    const auto [code, output] = run_command(
        {OUTBOXD_BINARY, "migrate", "--runtime-role", roles.runtime, "--publisher-role", roles.publisher}, owner_env,
        60s);
    ASSERT_EQ(code, 0) << output;
    EXPECT_NE(output.find("granted the runtime role " + roles.runtime), std::string::npos) << output;

    // The handler's own table belongs to the application, which grants the runtime role on it.
    create_scripted_effect_table(db.url());
    {
        pqxx::connection conn{db.url()};
        pqxx::work tx{conn};
        tx.exec("GRANT SELECT, INSERT ON scripted_effect TO " + roles.runtime);
        tx.commit();
    }

    publish_many(with_user(db.url(), roles.publisher), "TestRequested", R"({"db": true})", 300);
    ChildProcess host({OUTBOXD_BINARY, "run"}, outboxd_env(with_user(db.url(), roles.runtime), plugin_dir),
                      (dir.path() / "host.log").string());
    const auto completed = [&] {
        return db.count("SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'");
    };
    ASSERT_TRUE(wait_until([&] { return completed() == 300; }, 60s)) << read_file((dir.path() / "host.log").string());
    host.signal(SIGTERM);
    EXPECT_EQ(host.wait(20s), std::optional<int>(0)) << read_file((dir.path() / "host.log").string());
    EXPECT_EQ(db.count("SELECT count(*) FROM scripted_effect"), 300);
    // Completed in their first attempt: no consumption rows (the fence's INSERT grant is
    // exercised by db_roles_test).
    EXPECT_EQ(db.count("SELECT count(*) FROM event_consumption e JOIN event_publication p USING (event_id) "
                       "WHERE p.attempt_count = 1"),
              0);
    EXPECT_EQ(db.count("SELECT count(*) FROM outbox_host WHERE stopped_at IS NOT NULL"), 1);
    // Every call is on record, in a partition the host had the owner's function create.
    EXPECT_EQ(db.count("SELECT count(*) FROM outbox_attempt WHERE outcome = 'succeeded'"), 300);
    EXPECT_EQ(db.count("SELECT count(*) FROM outbox_attempt_default"), 0);
    EXPECT_GE(db.count("SELECT count(*) FROM outbox_attempt_partition"), 1);
    // The runtime role stayed what it was granted: it owns nothing.
    EXPECT_EQ(db.count("SELECT count(*) FROM pg_class WHERE relowner = '" + roles.runtime + "'::regrole"), 0);
    EXPECT_EQ(read_file((dir.path() / "host.log").string()).find("database.url connects as"), std::string::npos)
        << "a host with only the runtime role's rights is not warned about";
}

void on_server(const std::string& sql) {
    pqxx::connection conn{server_url()};
    pqxx::nontransaction tx{conn};
    tx.exec0(sql);
}

TEST(DbRolesE2e, MigrateRefusesSuperusersAndMembersOfTheOwnerAsRuntimeOrPublisherRole) {
    const TestRoles roles;
    const FreshDatabase db;
    const TempDir dir;
    const auto owner_env = outboxd_env(db.url(), dir.path());
    on_server("ALTER ROLE " + roles.other + " SUPERUSER");
    auto [code, output] = run_command({OUTBOXD_BINARY, "migrate", "--runtime-role", roles.other}, owner_env, 60s);
    EXPECT_EQ(code, 2) << output;
    EXPECT_NE(output.find("role '" + roles.other + "' is a superuser (--runtime-role)"), std::string::npos) << output;
    EXPECT_EQ(std::count(output.begin(), output.end(), '\n'), 1) << output;

    on_server("ALTER ROLE " + roles.other + " NOSUPERUSER");
    pqxx::connection conn{db.url()};
    const std::string owner = pqxx::nontransaction{conn}.exec1("SELECT current_user")[0].as<std::string>();
    on_server("GRANT " + owner + " TO " + roles.other);
    std::tie(code, output) = run_command({OUTBOXD_BINARY, "migrate", "--publisher-role", roles.other}, owner_env, 60s);
    EXPECT_EQ(code, 2) << output;
    EXPECT_NE(output.find("role '" + roles.other + "' is a member of '" + owner + "', which owns the outbox tables"),
              std::string::npos)
        << output;
    std::tie(code, output) = run_command({OUTBOXD_BINARY, "migrate", "--runtime-role", roles.runtime}, owner_env, 60s);
    EXPECT_EQ(code, 0) << output;
    on_server("REVOKE " + owner + " FROM " + roles.other);
}

TEST(DbRolesE2e, AHostWithTheOwnersRightsWarnsOnceOrRefusesWhenLeastPrivilegeIsRequired) {
    const FreshDatabase db;
    const TempDir dir;
    const fs::path plugin_dir = make_plugin_dir(dir.path());
    auto owner_env = outboxd_env(db.url(), plugin_dir);
    const auto [migrate_code, migrate_output] = run_command({OUTBOXD_BINARY, "migrate"}, owner_env, 60s);
    ASSERT_EQ(migrate_code, 0) << migrate_output;
    pqxx::connection conn{db.url()};
    const std::string owner = pqxx::nontransaction{conn}.exec1("SELECT current_user")[0].as<std::string>();

    const std::string log = (dir.path() / "owner.log").string();
    {
        ChildProcess host({OUTBOXD_BINARY, "run"}, owner_env, log);
        ASSERT_TRUE(wait_until([&] { return read_file(log).find("started as") != std::string::npos; }, 30s))
            << read_file(log);
        host.signal(SIGTERM);
        EXPECT_EQ(host.wait(20s), std::optional<int>(0)) << read_file(log);
    }
    const std::string text = read_file(log);
    const std::string warning = "database.url connects as role '" + owner + "' is a superuser";
    EXPECT_NE(text.find(warning), std::string::npos) << text;
    EXPECT_EQ(text.find(warning), text.rfind(warning)) << "one warning line: " << text;
    EXPECT_NE(text.find("--runtime-role"), std::string::npos) << "names the fix: " << text;

    owner_env["OUTBOX_DATABASE_REQUIRE_LEAST_PRIVILEGE"] = "true";
    const auto [code, output] = run_command({OUTBOXD_BINARY, "run"}, owner_env, 30s);
    EXPECT_EQ(code, 2) << output;
    EXPECT_NE(output.find("database.require_least_privilege is true and " + warning), std::string::npos) << output;
    EXPECT_EQ(std::count(output.begin(), output.end(), '\n'), 1) << output;
}

}  // namespace
}  // namespace outbox::test
