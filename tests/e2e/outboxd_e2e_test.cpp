// The installed shape of outboxd: the real binary, a plugin directory with a real .so, a
// real PostgreSQL, signals and kill -9.
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include <pqxx/pqxx>
#include <signal.h>

#include "support/child_process.hpp"
#include "support/pg_fixture.hpp"
#include "support/plugin_dir.hpp"
#include "support/temp_dir.hpp"
#include "support/test_host.hpp"

namespace outbox::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

class Outboxd : public ::testing::Test {
protected:
    void SetUp() override {
        create_scripted_effect_table(db_.url());
        plugin_dir_ = scripted_plugin_dir(dir_.path());
    }

    std::map<std::string, std::string> env(const std::string& database_url) const {
        return outboxd_env(database_url, plugin_dir_);
    }
    std::unique_ptr<ChildProcess> start_outboxd(const std::string& log_name) {
        return std::make_unique<ChildProcess>(std::vector<std::string>{OUTBOXD_BINARY, "run"}, env(db_.url()),
                                              (dir_.path() / log_name).string());
    }
    long long count(const std::string& sql) const { return std::stoll(db_.scalar(sql)); }
    long long completed() const {
        return count("SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'");
    }

    TestDatabase db_;
    TempDir dir_;
    fs::path plugin_dir_;
};

TEST_F(Outboxd, ProcessesAThousandEventsAndExitsZeroOnSigterm) {
    publish_many(db_.url(), "TestRequested", R"({"db": true})", 1000);
    auto host = start_outboxd("host.log");
    ASSERT_TRUE(wait_until([&] { return completed() == 1000; }, 60s)) << read_file((dir_.path() / "host.log").string());
    host->signal(SIGTERM);
    EXPECT_EQ(host->wait(20s), std::optional<int>(0));
    EXPECT_EQ(count("SELECT count(*) FROM scripted_effect"), 1000);
    // Each completed in its first attempt: COMPLETED says the handler consumed it, no rows.
    EXPECT_EQ(count("SELECT count(*) FROM event_consumption"), 0);
    const std::string log = read_file((dir_.path() / "host.log").string());
    EXPECT_NE(log.find("plugin loaded: handler scripted"), std::string::npos) << log;
    EXPECT_NE(log.find("outboxd stopped"), std::string::npos) << log;
}

TEST_F(Outboxd, KillNineMidRunThenRestartLosesNothingAndDuplicatesNoEffect) {
    publish_many(db_.url(), "TestRequested", R"({"db": true, "sleep_ms": 15})", 1000);
    auto first = start_outboxd("first.log");
    ASSERT_TRUE(wait_until([&] { return completed() >= 150; }, 60s)) << read_file((dir_.path() / "first.log").string());
    first->signal(SIGKILL);
    EXPECT_EQ(first->wait(10s), std::optional<int>(128 + SIGKILL));
    const long long done_before_restart = completed();
    EXPECT_LT(done_before_restart, 1000) << "the kill must land mid-run for this test to mean anything";

    auto second = start_outboxd("second.log");
    ASSERT_TRUE(wait_until([&] { return completed() == 1000; }, 90s))
        << read_file((dir_.path() / "second.log").string());
    second->signal(SIGTERM);
    EXPECT_EQ(second->wait(20s), std::optional<int>(0));
    EXPECT_EQ(count("SELECT count(*) FROM scripted_effect"), 1000) << "no handler DB effect committed twice";
    EXPECT_EQ(count("SELECT count(DISTINCT event_id) FROM scripted_effect"), 1000);
    // A consumption row exactly for the events completed after their first attempt.
    EXPECT_EQ(count("SELECT count(*) FROM event_publication e WHERE (SELECT count(*) FROM event_consumption c "
                    "WHERE c.event_id = e.event_id) <> CASE WHEN e.attempt_count = 1 THEN 0 ELSE 1 END"),
              0);
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE status <> 'COMPLETED'"), 0);
}

TEST_F(Outboxd, BadConfigurationExitsTwoWithOneLineNamingKeyAndValue) {
    auto environment = env(db_.url());
    environment["OUTBOX_BATCH_SIZE"] = "lots";
    const auto [code, output] = run_command({OUTBOXD_BINARY, "run"}, environment, 20s);
    EXPECT_EQ(code, 2) << output;
    EXPECT_NE(output.find("batch_size"), std::string::npos) << output;
    EXPECT_NE(output.find("lots"), std::string::npos) << output;
    EXPECT_EQ(std::count(output.begin(), output.end(), '\n'), 1) << output;
}

TEST_F(Outboxd, RunRefusesAnUnmigratedDatabaseAndMigrateFixesIt) {
    const std::string name = "outbox_e2e_empty_" + std::to_string(::getpid());
    {
        pqxx::connection admin(server_url());
        pqxx::nontransaction tx(admin);
        tx.exec("DROP DATABASE IF EXISTS " + name);
        tx.exec("CREATE DATABASE " + name);
    }
    const std::string url = with_database(server_url(), name);
    const auto [run_code, run_output] = run_command({OUTBOXD_BINARY, "run"}, env(url), 20s);
    EXPECT_EQ(run_code, 1) << run_output;
    EXPECT_NE(run_output.find("outboxd migrate"), std::string::npos) << run_output;

    const auto [migrate_code, migrate_output] = run_command({OUTBOXD_BINARY, "migrate"}, env(url), 60s);
    EXPECT_EQ(migrate_code, 0) << migrate_output;
    EXPECT_NE(migrate_output.find("applied V1__"), std::string::npos) << migrate_output;
    const auto [again_code, again_output] = run_command({OUTBOXD_BINARY, "migrate"}, env(url), 60s);
    EXPECT_EQ(again_code, 0) << again_output;
    EXPECT_NE(again_output.find("up to date"), std::string::npos) << again_output;

    pqxx::connection admin(server_url());
    pqxx::nontransaction tx(admin);
    tx.exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
}

TEST_F(Outboxd, StatusShowsBacklogAndReviewCodes) {
    publish_many(db_.url(), "TestRequested", "{}", 2);
    publish_many(db_.url(), "Unwanted", "{}", 1);
    db_.exec("UPDATE event_publication SET status = 'REVIEW_REQUIRED', last_error_code = 'HTTP_422' "
             "WHERE event_id = (SELECT event_id FROM event_publication WHERE event_type = 'TestRequested' LIMIT 1)");
    db_.exec("UPDATE event_publication SET next_attempt_at = now() - interval '5 minutes', "
             "occurred_at = now() - interval '5 minutes' WHERE event_type = 'Unwanted'");
    const auto [code, output] = run_command({OUTBOXD_BINARY, "status"}, env(db_.url()), 20s);
    EXPECT_EQ(code, 0) << output;
    EXPECT_NE(output.find("HTTP_422"), std::string::npos) << output;
    EXPECT_NE(output.find("Unwanted"), std::string::npos) << output;
    EXPECT_NE(output.find("REVIEW_REQUIRED"), std::string::npos) << output;
}

}  // namespace
}  // namespace outbox::test
