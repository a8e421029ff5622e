// Commit groups (handlers.<name>.commit_group) against a real PostgreSQL with the scripted
// plugin through the real loader: several events' ctx.db() work in one transaction, each in
// a savepoint of its own, each completion fenced by its own lease.
#include <gtest/gtest.h>

#include <pqxx/pqxx>

#include "support/pg_fixture.hpp"
#include "support/test_host.hpp"

namespace outbox::test {
namespace {

using namespace std::chrono_literals;

class CommitGroup : public ::testing::Test {
protected:
    void SetUp() override { create_scripted_effect_table(db_.url()); }

    long long count(const std::string& sql) const { return std::stoll(db_.scalar(sql)); }
    std::string of(const std::string& column, const std::string& id) const {
        return db_.scalar("SELECT " + column + " FROM event_publication WHERE event_id = '" + id + "'");
    }
    bool all_in(const std::string& status, long long expected) const {
        return count("SELECT count(*) FROM event_publication WHERE status = '" + status + "'") == expected;
    }
    std::string statuses() const {
        return db_.scalar("SELECT string_agg(status || '=' || n, ', ') FROM (SELECT status, count(*) n FROM "
                          "event_publication GROUP BY 1) s");
    }
    /// One worker and room for every event of the test in its queue. A fresh host's first
    /// claim takes only as many events as it has workers (one): publish_warm_up() first, so
    /// that the test's events are claimed together while it runs, and one group runs them
    /// (unless max_wait ends it first).
    static dispatch::RuntimeOptions one_worker(const std::string& url, int events) {
        auto options = fast_options(url, "h1");
        options.concurrency = 1;
        options.batch_size = events;
        return options;
    }
    static std::map<std::string, config::HandlerSettings> grouped(int max_events, std::chrono::milliseconds max_wait,
                                                                  std::chrono::milliseconds timeout = 30s) {
        config::HandlerSettings settings;
        settings.timeout = timeout;
        settings.commit_group = {.max_events = max_events, .max_wait = max_wait};
        return {{"scripted", settings}};
    }
    /// Transactions that completed the events with an effect: the fence sets completed_at to
    /// now(), its transaction's start, the same for every event of one transaction. (Their
    /// xmin differs: each event's rows are written by a subtransaction of its own.)
    long long completing_transactions() const {
        return count("SELECT count(DISTINCT e.completed_at) FROM event_publication e JOIN scripted_effect x "
                     "USING (event_id) WHERE e.status = 'COMPLETED' AND e.payload->>'warm_up' IS NULL");
    }
    /// The event a one-worker host's first claim takes alone; it runs long enough (500 ms,
    /// against one claim's round trip) for the next claim to take all the others.
    void publish_warm_up() const { publish_one(R"({"db": true, "sleep_ms": 500, "warm_up": true})"); }
    /// The events in publication order with their completing transaction's number, for
    /// failure messages.
    std::string transactions_in_order() const {
        return db_.scalar("SELECT string_agg(coalesce(t::text, '-'), ' ' ORDER BY occurred_at) FROM (SELECT "
                          "e.occurred_at, dense_rank() OVER (ORDER BY e.completed_at) AS t FROM event_publication e) s");
    }
    std::string publish_one(const std::string& payload) const {
        return publish_many(db_.url(), "TestRequested", payload, 1).front();
    }

    TestDatabase db_;
};

// Every event's effect is committed once, with the fence that completed the event (same
// xmin: the savepoint's subtransaction), and fewer transactions than events ran: the
// events shared them.
TEST_F(CommitGroup, GroupedEventsCommitEachEffectOnceWithItsCompletion) {
    constexpr int kEvents = 400;
    publish_many(db_.url(), "TestRequested", R"({"db": true})", kEvents);
    auto options = fast_options(db_.url(), "h1");
    options.batch_size = 100;
    TestHost host(options, {OUTBOX_FIXTURE_SCRIPTED}, {}, 30s, grouped(32, 10s));
    host.start();
    ASSERT_TRUE(wait_until([&] { return all_in("COMPLETED", kEvents); }, 60s)) << statuses();
    host.stop();
    EXPECT_EQ(count("SELECT count(*) FROM scripted_effect"), kEvents);
    EXPECT_EQ(count("SELECT count(DISTINCT event_id) FROM scripted_effect"), kEvents);
    EXPECT_EQ(count("SELECT count(*) FROM event_publication e JOIN scripted_effect x USING (event_id) "
                    "WHERE e.xmin::text = x.xmin::text AND e.attempt_count = 1"),
              kEvents)
        << "each effect commits in the transaction that completes its event, in the first attempt";
    const long long transactions = completing_transactions();
    EXPECT_LT(transactions, kEvents / 4) << "events shared transactions (groups of up to 32)";
    EXPECT_EQ(count("SELECT count(*) FROM event_consumption"), 0) << "first-attempt completions write no rows";
    EXPECT_EQ(host.metrics().outcome_count(metrics::Metrics::Outcome::Completed), static_cast<std::uint64_t>(kEvents));
}

// In one group, a retryable failure, a refusal and an exception each roll back their own
// savepoint (the effect they wrote is gone) and get their own outcome, while the events
// around them commit together.
TEST_F(CommitGroup, OneFailingEventRollsBackOnlyItsOwnWorkAndGetsItsOwnOutcome) {
    publish_warm_up();
    std::vector<std::string> ok;
    std::string retry;
    std::string review;
    std::string thrown;
    for (int i = 0; i < 12; ++i) {
        if (i == 3) {
            retry = publish_one(R"({"db": true, "mode": "retry"})");
        } else if (i == 6) {
            review = publish_one(R"({"db": true, "mode": "review"})");
        } else if (i == 9) {
            thrown = publish_one(R"({"db": true, "mode": "throw_std"})");
        } else {
            ok.push_back(publish_one(R"({"db": true})"));
        }
    }
    auto options = one_worker(db_.url(), 13);
    options.initial_backoff = 1h;  // the retried events wait, so their first outcome stays visible
    options.max_backoff = 1h;
    TestHost host(options, {OUTBOX_FIXTURE_SCRIPTED}, {}, 30s, grouped(64, 10s));
    host.start();
    ASSERT_TRUE(wait_until([&] { return all_in("COMPLETED", 10) && all_in("RETRY_WAIT", 2) && all_in("REVIEW_REQUIRED", 1); },
                           30s))
        << statuses();
    host.stop();
    EXPECT_EQ(of("last_error_code", retry), "HTTP_503");
    EXPECT_EQ(of("last_error_code", review), "HTTP_422");
    EXPECT_EQ(of("status", review), "REVIEW_REQUIRED");
    EXPECT_EQ(of("last_error_code", thrown), "UNCLASSIFIED");
    EXPECT_EQ(count("SELECT count(*) FROM scripted_effect WHERE event_id IN ('" + retry + "', '" + review + "', '" +
                    thrown + "')"),
              0)
        << "each failed event's effect was rolled back with its savepoint";
    EXPECT_EQ(count("SELECT count(*) FROM scripted_effect"), 10);
    EXPECT_EQ(completing_transactions(), 1) << transactions_in_order()
        << "the nine good events, before and after the failures, committed in one transaction";
    EXPECT_EQ(count("SELECT count(*) FROM event_publication e JOIN scripted_effect x USING (event_id) "
                    "WHERE e.xmin::text = x.xmin::text"),
              10);
}

// Another host took one event's lease while the group ran (its token changed under the
// group): that event's fence fails inside its savepoint, so its effect is rolled back and
// its row left to the new owner, while the rest of the group commits.
TEST_F(CommitGroup, ALostLeaseInTheGroupDoesNotCommitThatEventsEffect) {
    publish_warm_up();
    // The first event holds the group for a moment before its own write, giving the test
    // time to take over a later event.
    const std::string first = publish_one(R"({"db": true, "sleep_ms": 5000, "ignore_cancel": true})");
    std::vector<std::string> rest;
    for (int i = 0; i < 4; ++i) rest.push_back(publish_one(R"({"db": true})"));
    auto options = one_worker(db_.url(), 6);
    // No beat before the group is done: the fence, not the heartbeat, has to notice.
    options.lease_duration = 60s;
    TestHost host(options, {OUTBOX_FIXTURE_SCRIPTED}, {}, 30s, grouped(8, 10s));
    host.start();
    ASSERT_TRUE(wait_until([&] { return of("status", rest[1]) == "PROCESSING"; }, 20s)) << statuses();
    ASSERT_EQ(count("SELECT count(*) FROM scripted_effect x JOIN event_publication e USING (event_id) "
                    "WHERE e.payload->>'warm_up' IS NULL"),
              0)
        << "the group had to be still open";
    const std::string stolen = db_.scalar("UPDATE event_publication SET lease_token = gen_random_uuid(), lease_owner = "
                                          "'h2' WHERE event_id = '" + rest[1] + "' RETURNING lease_token::text");
    ASSERT_TRUE(wait_until([&] { return all_in("COMPLETED", 5); }, 20s)) << statuses();
    host.stop();
    EXPECT_EQ(count("SELECT count(*) FROM scripted_effect WHERE event_id = '" + rest[1] + "'"), 0)
        << "the effect of the event whose lease was lost must not commit";
    EXPECT_EQ(of("status", rest[1]), "PROCESSING");
    EXPECT_EQ(of("lease_token::text", rest[1]), stolen) << "the new owner's lease is left alone";
    EXPECT_EQ(count("SELECT count(*) FROM scripted_effect"), 5);
    EXPECT_EQ(completing_transactions(), 1) << transactions_in_order() << "the other four committed together";
    EXPECT_GE(host.metrics().leases_lost(), 1u);
}

// A call that overruns its deadline plus outbox.abandon_grace is abandoned: the group
// commits the events before it without waiting for it, gives back the ones after it, and
// the stuck event follows the abandoned-call path (HANDLER_TIMEOUT once it returns, then a
// retry that completes it).
TEST_F(CommitGroup, AnOverrunningCallIsLeftOutAndTheRestOfItsGroupCommitsWithoutWaitingForIt) {
    publish_warm_up();
    const std::string before = publish_one(R"({"db": true})");
    // Sleeps 8 s in its first attempt, ignoring ctx.cancelled(): abandoned at about
    // timeout (1 s) + abandon_grace (2 s), returns about 5 s later.
    const std::string stuck = publish_one(R"({"db": true, "sleep_ms": 8000, "ignore_cancel": true, "hang_times": 1})");
    const std::string after = publish_one(R"({"db": true})");
    auto options = one_worker(db_.url(), 4);
    TestHost host(options, {OUTBOX_FIXTURE_SCRIPTED}, {}, 30s, grouped(8, 60s, 1s));
    host.start();
    ASSERT_TRUE(wait_until([&] { return of("status", before) == "COMPLETED" && of("status", after) == "COMPLETED"; },
                           20s))
        << statuses();
    // Within the 8 s the stuck call sleeps, with about 5 s to spare after its abandonment
    // (3 s): a machine this slow would fail many other tests first.
    EXPECT_EQ(of("status", stuck), "PROCESSING") << "the others committed while the stuck call still ran";
    EXPECT_EQ(of("attempt_count", after), "1") << "the event after the stuck one was given back, its attempt refunded";
    ASSERT_TRUE(wait_until([&] { return all_in("COMPLETED", 4); }, 30s)) << statuses();
    host.stop();
    EXPECT_EQ(of("attempt_count", stuck), "2");
    EXPECT_EQ(db_.scalar("SELECT string_agg(attempt::text, ',') FROM scripted_effect WHERE event_id = '" + stuck + "'"),
              "2")
        << "only the retry's effect committed";
    EXPECT_EQ(count("SELECT count(*) FROM scripted_effect"), 4);
}

// A group is not held open for max_events when events come slowly: it commits max_wait
// after its first statement, and the rest go on in the next transaction.
TEST_F(CommitGroup, AGroupCommitsAfterMaxWaitWithWhatItHas) {
    publish_warm_up();
    for (int i = 0; i < 4; ++i) publish_one(R"({"db": true, "sleep_ms": 500})");
    TestHost host(one_worker(db_.url(), 5), {OUTBOX_FIXTURE_SCRIPTED}, {}, 30s, grouped(64, 200ms));
    host.start();
    ASSERT_TRUE(wait_until([&] { return all_in("COMPLETED", 5); }, 20s)) << statuses();
    host.stop();
    // Each call sleeps 500 ms before its write. A member's write opens the transaction;
    // the next member's call passes max_wait (200 ms), so the group commits after it: at
    // most two events per transaction, where 64 would fit, and two in at least one. The
    // warm-up counts too: on a loaded machine the second claim can land before the worker
    // picks the warm-up up, and then the warm-up opens the same group as the others.
    EXPECT_EQ(count("SELECT max(n) FROM (SELECT count(*) n FROM event_publication e JOIN scripted_effect x "
                    "USING (event_id) WHERE e.status = 'COMPLETED' GROUP BY e.completed_at) g"),
              2)
        << transactions_in_order();
}

}  // namespace
}  // namespace outbox::test
