// Parked successors (review F8): events held back by an earlier event of their aggregate are
// parked out of the claim's walk, and released when the event ahead of them finishes, by
// the trigger of migration V22 or, when two finishes of one aggregate miss each other, by
// the sweep. Real PostgreSQL; the interleavings are played with connections of their own.
#include <gtest/gtest.h>

#include <regex>
#include <thread>

#include <pqxx/pqxx>

#include "db/db_session.hpp"
#include "lease/lease_store.hpp"
#include "operations/event_query.hpp"
#include "support/bookkeeping_connection.hpp"
#include "support/pg_fixture.hpp"
#include "support/test_host.hpp"

namespace outbox::test {
namespace {

using namespace std::chrono_literals;

class Parking : public ::testing::Test {
protected:
    void SetUp() override {
        conn_ = bookkeeping_connection(db_.url());
        // A pass that waited for a lock this test holds would otherwise wait forever.
        pqxx::nontransaction(*conn_).exec("SET lock_timeout = '5s'");
    }

    long long count(const std::string& sql) const { return std::stoll(db_.scalar(sql)); }
    long long parked() const {
        return count("SELECT count(*) FROM event_publication WHERE next_attempt_at = 'infinity'");
    }
    std::string id_at(const std::string& key, int seq) const {
        return db_.scalar("SELECT event_id::text FROM event_publication WHERE aggregate_key = '" + key +
                          "' AND aggregate_seq = " + std::to_string(seq));
    }
    bool is_parked(const std::string& id) const {
        return db_.scalar("SELECT next_attempt_at = 'infinity' FROM event_publication WHERE event_id = '" + id + "'") ==
               "t";
    }

    /// Events of aggregate `key` at positions 1..n, published a minute ago; the first has
    /// status `head_status`, the others are PENDING.
    void aggregate(const std::string& key, int n, const std::string& head_status) const {
        db_.exec("WITH e AS (SELECT i, CASE WHEN i = 1 THEN '" + head_status +
                 "' ELSE 'PENDING' END AS status FROM generate_series(1, " + std::to_string(n) +
                 ") AS i) "
                 "INSERT INTO event_publication (company_id, event_type, aggregate_key, aggregate_seq, payload, status, "
                 "attempt_count, next_attempt_at, occurred_at, completed_at, lease_owner, lease_token, lease_expires_at) "
                 "SELECT 'acme', 'OrderedStep', '" + key + "', i, '{}', status, CASE WHEN i = 1 THEN 1 ELSE 0 END, "
                 "now() - interval '1 minute', now() - interval '1 minute', "
                 "CASE WHEN status IN ('COMPLETED', 'DISCARDED') THEN now() END, "
                 "CASE WHEN status = 'PROCESSING' THEN 'h' END, "
                 "CASE WHEN status = 'PROCESSING' THEN gen_random_uuid() END, "
                 "CASE WHEN status = 'PROCESSING' THEN now() + interval '1 hour' END FROM e");
    }

    /// Parks until a pass finds nothing more, as the host's parker does; returns the total.
    int park_all() {
        lease::LeaseStore store(*conn_);
        int total = 0;
        for (;;) {
            const auto pass = store.park_blocked(2000, 0ms);
            total += pass.parked;
            if (pass.parked == 0) return total;
        }
    }

    /// The due rows one claim of 100 events reads past without claiming them: the ordering
    /// filter's "Rows Removed by Filter" of the walk of the company's due rows, measured with EXPLAIN
    /// ANALYZE and rolled back.
    long long rows_walked_past() {
        lease::LeaseStore(*conn_).claim({"Nothing"}, 1, {"h", ""}, 5s);  // declares the statement
        pqxx::work tx(*conn_);
        std::string plan;
        for (const auto& row : tx.exec("EXPLAIN (ANALYZE, BUFFERS) EXECUTE outbox_claim_fair('{OrderedStep}', 100, "
                                       "'h', 5000, '', '', '', '{}', '{}', '{}', 0, false)")) {
            plan += row[0].c_str();
            plan += '\n';
        }
        tx.abort();
        const std::regex removed("Index Scan using event_publication_company_due_idx[^\\n]*\\n(?:[^\\n]*\\n)*?[^\\n]*Rows Removed "
                                 "by Filter: ([0-9]+)");
        std::smatch match;
        if (!std::regex_search(plan, match, removed)) return 0;
        return std::stoll(match[1].str());
    }

    TestDatabase db_;
    std::unique_ptr<pqxx::connection> conn_;
};

TEST_F(Parking, TheSuccessorsOfAReviewedHeadAreParkedSoTheClaimReadsOnlyClaimableRows) {
    aggregate("user-x", 20001, "REVIEW_REQUIRED");
    db_.exec("INSERT INTO event_publication (company_id, event_type, payload) "
             "SELECT 'acme', 'OrderedStep', '{}' FROM generate_series(1, 200)");
    db_.exec("ANALYZE event_publication");
    EXPECT_GE(rows_walked_past(), 20000) << "before parking, every claim reads the 20,000 blocked successors";

    EXPECT_EQ(park_all(), 20000);
    EXPECT_EQ(parked(), 20000);
    EXPECT_LT(rows_walked_past(), 10) << "parked successors are beyond the claim's walk";

    lease::LeaseStore store(*conn_);
    const auto claimed = store.claim({"OrderedStep"}, 1000, {"h", ""}, 5s);
    EXPECT_EQ(claimed.size(), 200u) << "the unrelated events, and nothing of user-x";

    // An operator re-drives the head: it is unfinished again, its successors stay parked.
    db_.exec("UPDATE event_publication SET status = 'PENDING', next_attempt_at = now() WHERE aggregate_seq = 1");
    EXPECT_EQ(parked(), 20000);
    // The head completes: the next event is due again at its own time, the rest stay parked.
    db_.exec("UPDATE event_publication SET status = 'COMPLETED', completed_at = now() WHERE aggregate_seq = 1");
    EXPECT_EQ(parked(), 19999);
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE aggregate_seq = 2 "
                    "AND next_attempt_at = occurred_at"),
              1);

    // The operator's view shows a parked event's due time and what holds it back.
    const auto third = operations::EventQuery(*conn_).get("acme", id_at("user-x", 3));
    ASSERT_TRUE(third);
    EXPECT_NE((*third)["next_attempt_at"].get<std::string>().find("T"), std::string::npos)
        << (*third)["next_attempt_at"].dump();
    EXPECT_EQ((*third)["blocked_by"], nlohmann::json(id_at("user-x", 2)));
}

TEST_F(Parking, EveryWayAnEventFinishesReleasesTheParkedEventBehindIt) {
    aggregate("by-discard", 3, "REVIEW_REQUIRED");
    aggregate("by-fence", 3, "PROCESSING");
    aggregate("by-delete", 3, "RETRY_WAIT");
    db_.exec("UPDATE event_publication SET next_attempt_at = now() + interval '1 hour' WHERE status = 'RETRY_WAIT'");
    EXPECT_EQ(park_all(), 6);

    db_.exec("UPDATE event_publication SET status = 'DISCARDED', completed_at = now() WHERE aggregate_key = 'by-discard' AND aggregate_seq = 1");
    const std::string token =
        db_.scalar("SELECT lease_token::text FROM event_publication WHERE aggregate_key = 'by-fence' AND aggregate_seq = 1");
    db_.exec("SELECT outbox_fence('" + id_at("by-fence", 1) + "', '" + token + "', '{ordered-recorder}', true)");
    db_.exec("DELETE FROM event_publication WHERE aggregate_key = 'by-delete' AND aggregate_seq = 1");

    for (const std::string key : {"by-discard", "by-fence", "by-delete"}) {
        EXPECT_FALSE(is_parked(id_at(key, 2))) << key << ": the new head is due";
        EXPECT_TRUE(is_parked(id_at(key, 3))) << key << ": its successor stays parked behind it";
    }
}

// The parking pass and a finish of the event that holds the parked one back, in both orders.
TEST_F(Parking, AFinishRacingTheParkingPassNeverLeavesItsSuccessorParked) {
    aggregate("pass-first", 2, "PROCESSING");
    aggregate("finish-first", 2, "PROCESSING");

    // The pass commits first (its FOR SHARE lock on the head held open here): the finish
    // waits for it, then its trigger sees the parked event and releases it.
    pqxx::connection pass_conn(db_.url());
    pqxx::work pass(pass_conn);
    pass.exec("SELECT 1 FROM event_publication WHERE event_id = '" + id_at("pass-first", 1) + "' FOR SHARE");
    pass.exec("UPDATE event_publication SET next_attempt_at = 'infinity' WHERE event_id = '" + id_at("pass-first", 2) +
              "'");
    std::thread finisher([&] {
        db_.exec("UPDATE event_publication SET status = 'COMPLETED', completed_at = now(), lease_owner = NULL, "
                 "lease_token = NULL, lease_expires_at = NULL WHERE event_id = '" + id_at("pass-first", 1) + "'");
    });
    ASSERT_TRUE(wait_until(
        [&] {
            return count("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE "
                         "'UPDATE event_publication SET status%'") == 1;
        },
        10s));
    pass.commit();
    finisher.join();
    EXPECT_FALSE(is_parked(id_at("pass-first", 2))) << "the finish that waited for the pass released its successor";

    // The finish holds the head first: the pass skips it rather than wait, and parks nothing.
    pqxx::connection finish_conn(db_.url());
    pqxx::work finish(finish_conn);
    finish.exec("UPDATE event_publication SET status = 'COMPLETED', completed_at = now(), lease_owner = NULL, "
                "lease_token = NULL, lease_expires_at = NULL WHERE event_id = '" + id_at("finish-first", 1) + "'");
    const auto started = std::chrono::steady_clock::now();
    EXPECT_EQ(lease::LeaseStore(*conn_).park_blocked(2000, 0ms).parked, 0);
    EXPECT_LT(std::chrono::steady_clock::now() - started, 2s) << "the pass never waits for a locked head";
    finish.commit();
    EXPECT_FALSE(is_parked(id_at("finish-first", 2)));
}

// Two events of one aggregate finishing at the same moment (an operator discards a waiting
// event while the head completes) each look for the first unfinished event before the other
// commits; neither releases the event behind both. The sweep does.
TEST_F(Parking, TwoFinishesOfOneAggregateThatMissEachOtherLeaveAParkedHeadTheSweepReleases) {
    aggregate("user-z", 3, "PROCESSING");
    EXPECT_EQ(park_all(), 2);

    pqxx::connection discard_conn(db_.url());
    pqxx::work discard(discard_conn);
    discard.exec("UPDATE event_publication SET status = 'DISCARDED', completed_at = now() WHERE event_id = '" + id_at("user-z", 2) + "'");
    std::thread completion([&] {
        db_.exec("UPDATE event_publication SET status = 'COMPLETED', completed_at = now(), lease_owner = NULL, "
                 "lease_token = NULL, lease_expires_at = NULL WHERE event_id = '" + id_at("user-z", 1) + "'");
    });
    ASSERT_TRUE(wait_until(
        [&] { return count("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'") == 1; }, 10s))
        << "the completion's trigger waits for the discarded event's row";
    discard.commit();
    completion.join();
    const std::string third = id_at("user-z", 3);
    ASSERT_TRUE(is_parked(third)) << "the interleaving this test plays";

    EXPECT_EQ(lease::LeaseStore(*conn_).release_parked(), 1);
    EXPECT_FALSE(is_parked(third));
    EXPECT_EQ(lease::LeaseStore(*conn_).release_parked(), 0);
}

TEST_F(Parking, TheSweepReadsParkedAggregatesStatementByStatementAndReleasesOnlyHeads) {
    // 7 aggregates whose head was parked by hand (as after a missed release) and 5 whose
    // parked events still wait behind a reviewed head.
    for (int a = 0; a < 7; ++a) aggregate("free-" + std::to_string(a), 3, "COMPLETED");
    db_.exec("UPDATE event_publication SET next_attempt_at = 'infinity' WHERE status = 'PENDING'");
    for (int a = 0; a < 5; ++a) aggregate("held-" + std::to_string(a), 3, "REVIEW_REQUIRED");
    EXPECT_EQ(park_all(), 10);

    EXPECT_EQ(lease::LeaseStore(*conn_).release_parked(2), 7) << "two aggregates per statement, every one read";
    for (int a = 0; a < 7; ++a) {
        const std::string key = "free-" + std::to_string(a);
        EXPECT_FALSE(is_parked(id_at(key, 2)));
        EXPECT_TRUE(is_parked(id_at(key, 3)));
    }
    EXPECT_EQ(parked(), 7 + 10);
}

}  // namespace
}  // namespace outbox::test
