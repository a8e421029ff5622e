// Retention: only COMPLETED and DISCARDED rows older than outbox.retention go, with their consumption
// rows, in batches, by one host at a time.
#include <gtest/gtest.h>

#include <thread>

#include <pqxx/pqxx>

#include "admin_support.hpp"
#include "lease/retention.hpp"
#include "support/test_host.hpp"

namespace outbox::test {
namespace {

using namespace std::chrono_literals;
using lease::Retention;

class RetentionTest : public ::testing::Test {
protected:
    long long count(const std::string& sql) const { return std::stoll(db_.scalar(sql)); }

    /// `n` COMPLETED events finished `age` ago, each consumed by one handler.
    std::vector<std::string> completed(int n, const std::string& age) {
        auto ids = publish_many(db_.url(), "TestRequested", "{}", n);
        db_.exec("UPDATE event_publication SET status = 'COMPLETED', attempt_count = 1, completed_at = now() - interval '" +
                 age + "', updated_at = now() - interval '" + age + "', occurred_at = now() - interval '" + age +
                 "' WHERE status = 'PENDING'");
        db_.exec("INSERT INTO event_consumption (event_id, handler_name) SELECT event_id, 'scripted' FROM "
                 "event_publication p WHERE status = 'COMPLETED' AND NOT EXISTS (SELECT 1 FROM event_consumption c "
                 "WHERE c.event_id = p.event_id)");
        return ids;
    }

    TestDatabase db_;
};

TEST_F(RetentionTest, DeletesOnlyCompletedRowsOlderThanTheRetentionWithTheirConsumption) {
    const auto old_done = completed(5, "8 days");
    const auto recent_done = completed(3, "6 days");
    // Old, but not COMPLETED: never deleted, whatever their age.
    const std::string review = review_event(db_);
    const auto pending = publish_many(db_.url(), "TestRequested", "{}", 2);
    db_.exec("UPDATE event_publication SET occurred_at = now() - interval '30 days', updated_at = now() - interval "
             "'30 days' WHERE status <> 'COMPLETED'");
    db_.exec("INSERT INTO event_consumption (event_id, handler_name) VALUES ('" + review + "', 'scripted')");
    db_.exec("INSERT INTO outbox_manual_retry (event_id, company_id, actor, reason, idempotency_key_hash, request_hash, "
             "previous_attempt_count, previous_status, previous_version, new_version) VALUES ('" + old_done[0] +
             "', 'acme', 'alice', 'an earlier re-drive', 'k', 'r', 8, 'REVIEW_REQUIRED', 4, 5)");

    pqxx::connection conn(db_.url());
    const auto deleted = Retention(7 * 24h).run_once(conn);
    ASSERT_TRUE(deleted);
    EXPECT_EQ(*deleted, 5);
    EXPECT_EQ(count("SELECT count(*) FROM event_publication"), 3 + 1 + 2);
    for (const auto& id : old_done) {
        EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE event_id = '" + id + "'"), 0);
        EXPECT_EQ(count("SELECT count(*) FROM event_consumption WHERE event_id = '" + id + "'"), 0)
            << "consumption rows go with their event";
    }
    EXPECT_EQ(count("SELECT count(*) FROM event_consumption"), 3 + 1);
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE status = 'REVIEW_REQUIRED'"), 1);
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE status = 'PENDING'"), 2);
    EXPECT_EQ(count("SELECT count(*) FROM outbox_manual_retry"), 1) << "operator history outlives the event";

    EXPECT_EQ(Retention(7 * 24h).run_once(conn), std::optional<long long>(0)) << "a second pass finds nothing";
}

TEST_F(RetentionTest, DeletesOldDiscardedRowsLikeCompletedOnes) {
    const auto old_discarded = publish_many(db_.url(), "TestRequested", "{}", 4);
    db_.exec("UPDATE event_publication SET status = 'DISCARDED', attempt_count = 8, completed_at = now() - interval "
             "'8 days' WHERE status = 'PENDING'");
    const auto recent_discarded = publish_many(db_.url(), "TestRequested", "{}", 2);
    db_.exec("UPDATE event_publication SET status = 'DISCARDED', attempt_count = 8, completed_at = now() - interval "
             "'6 days' WHERE status = 'PENDING'");
    const std::string review = review_event(db_);
    db_.exec("UPDATE event_publication SET updated_at = now() - interval '30 days' WHERE status = 'REVIEW_REQUIRED'");

    pqxx::connection conn(db_.url());
    const auto deleted = Retention(7 * 24h).run_once(conn);
    ASSERT_TRUE(deleted);
    EXPECT_EQ(*deleted, 4);
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE status = 'DISCARDED'"), 2)
        << "recently discarded events stay until the retention has passed";
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE event_id = '" + review + "'"), 1);
}

// There is no foreign key from event_consumption (migration V5); a statement-level trigger
// deletes the consumption rows of whatever events a DELETE removes, by retention or by hand.
TEST_F(RetentionTest, DeletingEventsByHandAlsoDeletesTheirConsumptionRows) {
    const auto gone = completed(4, "1 day");
    const auto kept = completed(2, "1 hour");
    db_.exec("DELETE FROM event_publication WHERE event_id IN ('" + gone[0] + "', '" + gone[1] + "', '" + gone[2] +
             "', '" + gone[3] + "')");
    EXPECT_EQ(count("SELECT count(*) FROM event_consumption"), 2);
    EXPECT_EQ(count("SELECT count(*) FROM event_consumption WHERE event_id IN ('" + kept[0] + "', '" + kept[1] + "')"), 2);
}

TEST_F(RetentionTest, DeletesEverythingDueInBatchesInOnePass) {
    completed(35, "2 hours");
    completed(4, "10 minutes");
    pqxx::connection conn(db_.url());
    EXPECT_EQ(Retention(1h, 10).run_once(conn), std::optional<long long>(35));
    EXPECT_EQ(count("SELECT count(*) FROM event_publication"), 4);
}

TEST_F(RetentionTest, TheDatabaseClockCanBeMovedForward) {
    completed(3, "1 hour");
    pqxx::connection conn(db_.url());
    const auto day_later = db_.scalar("SELECT (now() + interval '1 day')::text");
    EXPECT_EQ(Retention(24h).run_once(conn), std::optional<long long>(0));
    EXPECT_EQ(Retention(24h).run_once(conn, {}, day_later), std::optional<long long>(3));
}

TEST_F(RetentionTest, OnlyOneHostAtATime) {
    completed(3, "8 days");
    pqxx::connection other(db_.url());
    pqxx::nontransaction lock(other);
    lock.exec_params("SELECT pg_advisory_lock($1)", Retention::kLockKey);

    pqxx::connection conn(db_.url());
    EXPECT_EQ(Retention(24h).run_once(conn), std::nullopt) << "another host is running retention";
    EXPECT_EQ(count("SELECT count(*) FROM event_publication"), 3);

    lock.exec_params("SELECT pg_advisory_unlock($1)", Retention::kLockKey);
    EXPECT_EQ(Retention(24h).run_once(conn), std::optional<long long>(3));
    // The pass gave its lock back.
    EXPECT_TRUE(lock.exec_params1("SELECT pg_try_advisory_lock($1)", Retention::kLockKey)[0].as<bool>());
}

TEST_F(RetentionTest, TheBackgroundLoopRunsAtStartAndStopsPromptly) {
    completed(3, "8 days");
    db::OutageLog outage;
    std::jthread loop([&](std::stop_token stop) { Retention(24h).run(db_.url(), outage, 1h, stop); });
    EXPECT_TRUE(wait_until([&] { return count("SELECT count(*) FROM event_publication") == 0; }, 10s));
    const auto asked = std::chrono::steady_clock::now();
    loop.request_stop();
    loop.join();
    // Milliseconds when the wait is on the stop token; a wait on the 1 h interval would hang.
    EXPECT_LT(std::chrono::steady_clock::now() - asked, 5s);
}

}  // namespace
}  // namespace outbox::test
