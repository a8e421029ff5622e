// The worker runtime against a real PostgreSQL with real plugin files: claims, fencing,
// retries, review, lease recovery and concurrency across hosts.
#include <gtest/gtest.h>

#include <thread>

#include <pqxx/pqxx>

#include "lease/lease_store.hpp"
#include "support/pg_fixture.hpp"
#include "support/test_host.hpp"

namespace outbox::test {
namespace {

using namespace std::chrono_literals;

class Worker : public ::testing::Test {
protected:
    void SetUp() override { create_scripted_effect_table(db_.url()); }

    long long count(const std::string& sql) const { return std::stoll(db_.scalar(sql)); }
    std::string status_of(const std::string& id) const {
        return db_.scalar("SELECT status FROM event_publication WHERE event_id = '" + id + "'");
    }
    bool all_in(const std::string& status, long long expected) const {
        return count("SELECT count(*) FROM event_publication WHERE status = '" + status + "'") == expected;
    }
    /// Publishes `n` TestRequested events with `payload` and starts one host running both
    /// scripted handlers ("scripted", then "scripted-b") on them.
    std::unique_ptr<TestHost> run_both_handlers(const std::string& payload, int n) const {
        publish_many(db_.url(), "TestRequested", payload, n);
        auto host = std::make_unique<TestHost>(fast_options(db_.url(), "h1"),
                                               std::vector<std::string>{OUTBOX_FIXTURE_SCRIPTED, OUTBOX_FIXTURE_SCRIPTED_B});
        host->start();
        return host;
    }

    TestDatabase db_;
};

// Consumption rows record partial progress: the first handler's transaction writes one (the
// event is not finished yet); the last one completes the event in its first attempt, and
// COMPLETED says every handler consumed it, so it writes none.
TEST_F(Worker, CompletesEventsAndRecordsConsumptionOnlyForPartialProgress) {
    const auto host = run_both_handlers(R"({"db": true, "b_db": true})", 50);
    ASSERT_TRUE(wait_until([&] { return all_in("COMPLETED", 50); }, 20s));
    EXPECT_EQ(count("SELECT count(*) FROM event_consumption WHERE handler_name = 'scripted'"), 50);
    EXPECT_EQ(count("SELECT count(*) FROM event_consumption WHERE handler_name = 'scripted-b'"), 0);
    EXPECT_EQ(count("SELECT count(*) FROM scripted_effect"), 100);
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE attempt_count <> 1 OR completed_at IS NULL "
                    "OR lease_token IS NOT NULL OR lease_owner IS NOT NULL"),
              0);
    EXPECT_EQ(host->metrics().outcome_count(metrics::Metrics::Outcome::Completed), 50u);
}

// The last handler of a clean attempt that used ctx.db() completes the event in its own
// transaction: rows written by one transaction share xmin. In the first attempt it writes
// no consumption rows (COMPLETED says it all).
TEST_F(Worker, TheLastHandlerUsingCtxDbCompletesTheEventInItsOwnTransaction) {
    const auto host = run_both_handlers(R"({"db": false, "b_db": true})", 20);
    ASSERT_TRUE(wait_until([&] { return all_in("COMPLETED", 20); }, 20s));
    EXPECT_EQ(count("SELECT count(*) FROM event_publication e JOIN scripted_effect x USING (event_id) "
                    "WHERE e.xmin::text = x.xmin::text AND e.attempt_count = 1 AND e.version = 3"),
              20);
    EXPECT_EQ(count("SELECT count(*) FROM event_consumption"), 0);
    EXPECT_EQ(host->metrics().outcome_count(metrics::Metrics::Outcome::Completed), 20u);
}

// When the last handler does not use ctx.db(), the outcome goes through the batched
// outcome statement instead: the event's last change is not the effect's transaction.
TEST_F(Worker, AnEarlierHandlersTransactionDoesNotCompleteTheEvent) {
    const auto host = run_both_handlers(R"({"db": true, "b_db": false})", 20);
    ASSERT_TRUE(wait_until([&] { return all_in("COMPLETED", 20); }, 20s));
    EXPECT_EQ(count("SELECT count(*) FROM event_publication e JOIN scripted_effect x USING (event_id) "
                    "WHERE e.xmin::text <> x.xmin::text"),
              20);
    // The first handler's transaction records its progress; the completion adds no rows.
    EXPECT_EQ(count("SELECT count(*) FROM event_consumption WHERE handler_name = 'scripted'"), 20);
    EXPECT_EQ(count("SELECT count(*) FROM event_consumption"), 20);
}

// A failed attempt never completes in a handler transaction; the retry that goes well does.
TEST_F(Worker, AFailedAttemptIsStoredAndTheCleanRetryCompletesInTheHandlersTransaction) {
    const auto host = run_both_handlers(R"({"db": false, "b_db": true, "b_fail_times": 1})", 10);
    ASSERT_TRUE(wait_until([&] { return all_in("COMPLETED", 10); }, 20s));
    EXPECT_EQ(count("SELECT count(*) FROM event_publication e JOIN scripted_effect x USING (event_id) "
                    "WHERE e.xmin::text = x.xmin::text AND e.attempt_count = 2"),
              10);
    EXPECT_EQ(count("SELECT count(*) FROM scripted_effect"), 10) << "the failed attempt's effect was rolled back";
    // A completion after partial progress records every handler, so the rows tell the story.
    EXPECT_EQ(count("SELECT count(*) FROM event_consumption"), 20);
}

// Handler statements are prepared once per connection; when the handler's table changes
// shape under a prepared SELECT *, PostgreSQL refuses the stale plan. That attempt is
// retried with the statement prepared afresh instead of sending the event to review.
TEST_F(Worker, AHandlerTableChangingShapeUnderAPreparedStatementOnlyCostsARetry) {
    db_.exec("CREATE TABLE scripted_shape (a int); INSERT INTO scripted_shape VALUES (1)");
    auto options = fast_options(db_.url(), "h1");
    options.pool_size = 1;
    options.concurrency = 1;
    TestHost host(options, {OUTBOX_FIXTURE_SCRIPTED});
    host.start();
    publish_many(db_.url(), "TestRequested", R"({"db_select_star": true, "db": true})", 1);
    ASSERT_TRUE(wait_until([&] { return all_in("COMPLETED", 1); }, 20s));
    db_.exec("ALTER TABLE scripted_shape ADD COLUMN b int");
    const auto ids = publish_many(db_.url(), "TestRequested", R"({"db_select_star": true, "db": true})", 1);
    ASSERT_TRUE(wait_until([&] { return all_in("COMPLETED", 2); }, 20s)) << status_of(ids[0]);
    EXPECT_EQ(db_.scalar("SELECT attempt_count FROM event_publication WHERE event_id = '" + ids[0] + "'"), "2");
    EXPECT_EQ(count("SELECT count(*) FROM scripted_effect"), 2);
}

TEST_F(Worker, FourHostsNeverRunTheSameEventTwiceAndProcessEverything) {
    constexpr int kEvents = 5000;
    publish_many(db_.url(), "TestRequested", R"({"db": true, "b_db": false})", kEvents);
    std::vector<std::unique_ptr<TestHost>> hosts;
    for (int i = 0; i < 4; ++i) {
        auto options = fast_options(db_.url(), "host-" + std::to_string(i));
        options.batch_size = 10;
        hosts.push_back(std::make_unique<TestHost>(options, std::vector<std::string>{OUTBOX_FIXTURE_SCRIPTED,
                                                                                      OUTBOX_FIXTURE_SCRIPTED_B}));
    }
    for (auto& host : hosts) host->start();
    ASSERT_TRUE(wait_until([&] { return all_in("COMPLETED", kEvents); }, 120s))
        << db_.scalar("SELECT string_agg(status || '=' || n, ', ') FROM (SELECT status, count(*) n FROM "
                      "event_publication GROUP BY 1) s");
    for (auto& host : hosts) host->stop();
    // The ctx.db() handler's row for every event; completions in a first attempt add none.
    EXPECT_EQ(count("SELECT count(*) FROM event_consumption WHERE handler_name = 'scripted'"), kEvents);
    EXPECT_EQ(count("SELECT count(*) FROM (SELECT event_id, handler_name FROM event_consumption "
                    "GROUP BY 1, 2 HAVING count(*) > 1) d"),
              0);
    // Every handler effect committed exactly once: an overlapping or repeated run would
    // have written a second row (or failed with CONCURRENT_RUN and gone to review).
    EXPECT_EQ(count("SELECT count(*) FROM scripted_effect"), kEvents);
    EXPECT_EQ(count("SELECT count(DISTINCT event_id) FROM scripted_effect"), kEvents);
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE attempt_count <> 1"), 0);
    std::uint64_t claimed = 0;
    int hosts_that_worked = 0;
    for (auto& host : hosts) {
        claimed += host->metrics().events_claimed();
        hosts_that_worked += host->metrics().events_claimed() > 0 ? 1 : 0;
    }
    EXPECT_EQ(claimed, static_cast<std::uint64_t>(kEvents)) << "every event claimed exactly once across the fleet";
    EXPECT_GE(hosts_that_worked, 2) << "the load is shared, not serialized on one host";
}

TEST_F(Worker, RetryableFailureGoesToRetryWaitWithAFutureAttemptTime) {
    const auto ids = publish_many(db_.url(), "TestRequested", R"({"mode": "retry"})", 1);
    auto options = fast_options(db_.url(), "h1");
    options.initial_backoff = 60s;
    options.max_backoff = 60s;
    TestHost host(options, {OUTBOX_FIXTURE_SCRIPTED});
    host.start();
    ASSERT_TRUE(wait_until([&] { return status_of(ids[0]) == "RETRY_WAIT"; }, 10s));
    host.stop();
    const pqxx::result row = db_.exec(
        "SELECT attempt_count, last_error_code, extract(epoch FROM next_attempt_at - updated_at), lease_token IS NULL "
        "FROM event_publication");
    EXPECT_EQ(row[0][0].as<int>(), 1);
    EXPECT_EQ(row[0][1].as<std::string>(), "HTTP_503");
    // Measured from the outcome's write (one statement sets both), not from when the test
    // reads it. The delay runs from the decision, which is milliseconds before that write;
    // 5 s under the half allows a loaded machine.
    EXPECT_GT(row[0][2].as<double>(), 25.0) << "backoff is at least half of the 60s ceiling";
    EXPECT_LE(row[0][2].as<double>(), 60.0);
    EXPECT_TRUE(row[0][3].as<bool>());
}

TEST_F(Worker, RetryAfterFromTheHandlerDelaysTheNextAttempt) {
    publish_many(db_.url(), "TestRequested", R"({"mode": "retry", "retry_after_ms": 30000})", 1);
    TestHost host(fast_options(db_.url(), "h1"), {OUTBOX_FIXTURE_SCRIPTED});  // backoff 0
    host.start();
    ASSERT_TRUE(wait_until([&] { return all_in("RETRY_WAIT", 1); }, 10s));
    host.stop();
    // From the outcome's write, which sets both; the delay runs from the decision,
    // milliseconds before that write (5 s allows a loaded machine).
    const double delay = std::stod(db_.scalar("SELECT extract(epoch FROM next_attempt_at - updated_at) FROM event_publication"));
    EXPECT_GT(delay, 25.0);
    EXPECT_LE(delay, 30.0);
    EXPECT_EQ(db_.scalar("SELECT last_error_code FROM event_publication"), "HTTP_429");
}

TEST_F(Worker, RetryableFailureAtMaxAttemptsGoesToReview) {
    const auto ids = publish_many(db_.url(), "TestRequested", R"({"mode": "retry"})", 1);
    auto options = fast_options(db_.url(), "h1");
    options.max_attempts = 3;
    TestHost host(options, {OUTBOX_FIXTURE_SCRIPTED});
    host.start();
    ASSERT_TRUE(wait_until([&] { return status_of(ids[0]) == "REVIEW_REQUIRED"; }, 20s));
    EXPECT_EQ(db_.scalar("SELECT attempt_count FROM event_publication"), "3");
    EXPECT_EQ(db_.scalar("SELECT last_error_code FROM event_publication"), "HTTP_503");
    EXPECT_EQ(host.metrics().outcome_count(metrics::Metrics::Outcome::Retry), 2u);
    EXPECT_EQ(host.metrics().outcome_count(metrics::Metrics::Outcome::ReviewRequired), 1u);
}

TEST_F(Worker, NonRetryableFailureGoesToReviewAfterOneAttempt) {
    const auto ids = publish_many(db_.url(), "TestRequested", R"({"mode": "review"})", 1);
    TestHost host(fast_options(db_.url(), "h1"), {OUTBOX_FIXTURE_SCRIPTED});
    host.start();
    ASSERT_TRUE(wait_until([&] { return status_of(ids[0]) == "REVIEW_REQUIRED"; }, 10s));
    EXPECT_EQ(db_.scalar("SELECT attempt_count FROM event_publication"), "1");
    EXPECT_EQ(db_.scalar("SELECT last_error_code FROM event_publication"), "HTTP_422");
}

TEST_F(Worker, UnknownExceptionsAndUnsafeCodesAreStoredAsSafeCodesOnly) {
    const auto std_error = publish_many(db_.url(), "TestRequested", R"({"mode": "throw_std"})", 1)[0];
    const auto int_error = publish_many(db_.url(), "TestRequested", R"({"mode": "throw_int"})", 1)[0];
    const auto bad_code = publish_many(db_.url(), "TestRequested", R"({"mode": "bad_code"})", 1)[0];
    auto options = fast_options(db_.url(), "h1");
    options.max_attempts = 1;
    TestHost host(options, {OUTBOX_FIXTURE_SCRIPTED});
    host.start();
    ASSERT_TRUE(wait_until([&] { return all_in("REVIEW_REQUIRED", 3); }, 10s));
    auto code = [&](const std::string& id) {
        return db_.scalar("SELECT last_error_code FROM event_publication WHERE event_id = '" + id + "'");
    };
    EXPECT_EQ(code(std_error), "UNCLASSIFIED");
    EXPECT_EQ(code(int_error), "UNCLASSIFIED");
    EXPECT_EQ(code(bad_code), "INVALID_ERROR_CODE") << "a code carrying data never reaches the table";
}

TEST_F(Worker, RedeliveryRunsOnlyTheHandlerThatFailed) {
    const auto host = run_both_handlers(R"({"db": true, "b_db": true, "b_fail_times": 1})", 1);
    ASSERT_TRUE(wait_until([&] { return all_in("COMPLETED", 1); }, 10s));
    EXPECT_EQ(db_.scalar("SELECT attempt_count FROM event_publication"), "2");
    EXPECT_EQ(count("SELECT count(*) FROM scripted_effect WHERE handler_name = 'scripted'"), 1)
        << "the handler that succeeded on attempt 1 must not run again";
    // scripted-b wrote on attempt 1 too, but that transaction rolled back with its failure.
    EXPECT_EQ(count("SELECT count(*) FROM scripted_effect WHERE handler_name = 'scripted-b'"), 1);
    EXPECT_EQ(db_.scalar("SELECT attempt FROM scripted_effect WHERE handler_name = 'scripted-b'"), "2");
    EXPECT_EQ(count("SELECT count(*) FROM event_consumption"), 2);
}

TEST_F(Worker, SucceededHandlersWithoutDbAreRecordedEvenWhenAnotherFails) {
    const auto ids = publish_many(db_.url(), "TestRequested", R"({"b_mode": "retry"})", 1);
    auto options = fast_options(db_.url(), "h1");
    options.initial_backoff = 60s;
    options.max_backoff = 60s;
    TestHost host(options, {OUTBOX_FIXTURE_SCRIPTED, OUTBOX_FIXTURE_SCRIPTED_B});
    host.start();
    ASSERT_TRUE(wait_until([&] { return status_of(ids[0]) == "RETRY_WAIT"; }, 10s));
    host.stop();
    EXPECT_EQ(db_.scalar("SELECT string_agg(handler_name, ',') FROM event_consumption"), "scripted");
}

// The rescue rule lives in SQL (db/event_sql.hpp, kRescue): an expired lease with attempts left goes
// back to RETRY_WAIT due now (WORKER_LOST); one whose attempts are used up goes to review.
TEST_F(Worker, ExpiredLeaseIsRecoveredByAnotherHost) {
    const auto ids = publish_many(db_.url(), "TestRequested", R"({"db": true})", 2);
    // A host that claimed both events and died: PROCESSING with an expired lease.
    db_.exec("UPDATE event_publication SET status = 'PROCESSING', attempt_count = 1, lease_owner = 'dead-host', "
             "lease_token = gen_random_uuid(), lease_expires_at = now() - interval '1 second'");
    db_.exec("UPDATE event_publication SET attempt_count = 5 WHERE event_id = '" + ids[1] + "'");
    auto options = fast_options(db_.url(), "h1");
    options.lease_duration = 2s;  // rescue runs every second
    options.max_attempts = 5;
    TestHost host(options, {OUTBOX_FIXTURE_SCRIPTED});
    host.start();
    ASSERT_TRUE(wait_until([&] { return status_of(ids[0]) == "COMPLETED"; }, 15s));
    EXPECT_EQ(db_.scalar("SELECT attempt_count FROM event_publication WHERE event_id = '" + ids[0] + "'"), "2");
    EXPECT_EQ(status_of(ids[1]), "REVIEW_REQUIRED") << "an event whose attempts are used up is not retried forever";
    EXPECT_EQ(db_.scalar("SELECT last_error_code FROM event_publication WHERE event_id = '" + ids[1] + "'"),
              "WORKER_LOST");
    EXPECT_EQ(count("SELECT count(*) FROM scripted_effect"), 1);
}

// A lease this process holds on the server but does not track: what a failover leaves when
// a claim's answer or an asynchronously committed outcome is lost. Beside it, a lease of a
// former process with the same host_id (claimed before this one started) and another host's.
class UntrackedLeases : public Worker {
protected:
    /// Starts h1 and waits until it has claimed once (it notes the server's clock first).
    void start_host(std::chrono::milliseconds lease_duration) {
        auto options = fast_options(db_.url(), "h1");
        options.lease_duration = lease_duration;
        options.incarnation = "h1-this-process";
        host_ = std::make_unique<TestHost>(options, std::vector<std::string>{OUTBOX_FIXTURE_SCRIPTED});
        host_->start();
        const auto warm = publish_many(db_.url(), "TestRequested", R"({"db": true})", 1);
        ASSERT_TRUE(wait_until([&] { return status_of(warm[0]) == "COMPLETED"; }, 15s));
        // Inserted already PROCESSING: a published event would be claimed by h1 first.
        const auto leased = [&](const std::string& owner, const std::string& incarnation, const std::string& claimed_at) {
            return db_.scalar("INSERT INTO event_publication (company_id, event_type, payload, status, attempt_count, "
                              "lease_owner, lease_incarnation, lease_token, lease_expires_at, updated_at) VALUES ('acme', "
                              "'TestRequested', '{\"db\": true}', 'PROCESSING', 1, '" + owner + "', '" + incarnation +
                              "', gen_random_uuid(), now() + interval '1 hour', " + claimed_at + ") RETURNING event_id");
        };
        ids_ = {leased("h1", "h1-this-process", "now()"), leased("h1", "h1-former-process", "now() - interval '1 hour'"),
                leased("h2", "h2-process", "now()"),
                // Another live process started under the same host id (a shared OUTBOX_HOST_ID,
                // or `node:1` in PID namespaces) claimed it just now and is running it.
                leased("h1", "h1-twin-process", "now()")};
        tokens_before_ = lease_tokens();
    }
    std::string lease_tokens() const {
        return db_.scalar("SELECT string_agg(coalesce(lease_token::text, '-'), ',' ORDER BY event_id) FROM "
                          "event_publication WHERE event_id IN ('" + ids_[1] + "', '" + ids_[2] + "', '" + ids_[3] + "')");
    }
    /// The untracked lease ran (its attempt given back, then counted again); the other three
    /// are untouched.
    void expect_only_the_untracked_lease_released() {
        ASSERT_TRUE(wait_until([&] { return status_of(ids_[0]) == "COMPLETED"; }, 10s)) << status_of(ids_[0]);
        EXPECT_EQ(db_.scalar("SELECT attempt_count FROM event_publication WHERE event_id = '" + ids_[0] + "'"), "1");
        std::this_thread::sleep_for(2500ms);  // two more checks with lease_duration 2 s
        expect_the_others_untouched();
        EXPECT_EQ(count("SELECT count(*) FROM scripted_effect"), 2);
    }
    void expect_the_others_untouched() {
        EXPECT_EQ(status_of(ids_[1]), "PROCESSING") << "a former process's lease is the rescuer's";
        EXPECT_EQ(status_of(ids_[2]), "PROCESSING") << "another host's lease is not this host's to release";
        EXPECT_EQ(status_of(ids_[3]), "PROCESSING") << "nor is another live process's under the same host id";
        EXPECT_EQ(lease_tokens(), tokens_before_);
    }

    std::unique_ptr<TestHost> host_;
    std::vector<std::string> ids_;
    std::string tokens_before_;
};

TEST_F(UntrackedLeases, AreReleasedAtTheNextRescueIntervalInsteadOfAfterTheLeaseExpires) {
    start_host(2s);  // rescue interval 1 s
    expect_only_the_untracked_lease_released();
}

TEST_F(UntrackedLeases, AreReleasedRightAfterTheDatabaseComesBack) {
    start_host(std::chrono::minutes{5});  // rescue interval 30 s: only the reconnect can explain a release
    std::this_thread::sleep_for(300ms);
    ASSERT_EQ(status_of(ids_[0]), "PROCESSING");
    // Every connection of the host is cut: its wake-up listener reports an outage and its end.
    EXPECT_GE(count("SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name LIKE 'outboxd%'"),
              1);
    ASSERT_TRUE(wait_until([&] { return status_of(ids_[0]) == "COMPLETED"; }, 10s)) << status_of(ids_[0]);
    expect_the_others_untouched();
}

TEST_F(Worker, RescueBlamesTheSuspectALostHostWasRunningAndRefundsTheEventsBesideIt) {
    const auto ids = publish_many(db_.url(), "TestRequested", R"({"db": true})", 4);
    const auto lease = [&](const std::string& id, const std::string& owner, int attempt, const char* code) {
        db_.exec("UPDATE event_publication SET status = 'PROCESSING', attempt_count = " + std::to_string(attempt) +
                 ", lease_owner = '" + owner + "', lease_token = gen_random_uuid(), lease_expires_at = now() - "
                 "interval '1 second', last_error_code = " + code + " WHERE event_id = '" + id + "'");
    };
    lease(ids[0], "host-a", 3, "'WORKER_LOST'");  // host-a's suspect, on its last attempt
    lease(ids[1], "host-a", 1, "NULL");           // beside it, first attempt
    lease(ids[2], "host-a", 3, "'HTTP_503'");     // beside it, last attempt
    lease(ids[3], "host-b", 1, "NULL");           // host-b ran no suspect
    pqxx::connection conn(db_.url());
    EXPECT_EQ(lease::LeaseStore(conn).rescue_expired(3, 100), 4);
    const auto state = [&](const std::string& id) {
        return db_.scalar("SELECT status || ' ' || last_error_code || ' ' || attempt_count FROM event_publication "
                          "WHERE event_id = '" + id + "'");
    };
    EXPECT_EQ(state(ids[0]), "REVIEW_REQUIRED WORKER_LOST 3") << "the suspect pays for the crash";
    EXPECT_EQ(state(ids[1]), "RETRY_WAIT WORKER_LOST 0") << "an event beside a suspect gets its attempt back";
    EXPECT_EQ(state(ids[2]), "RETRY_WAIT WORKER_LOST 2") << "and becomes a suspect itself";
    EXPECT_EQ(state(ids[3]), "RETRY_WAIT WORKER_LOST 1") << "without a suspect, every event in flight is charged";
}

TEST_F(Worker, HostThatLostItsLeaseCommitsNeitherEffectsNorStatus) {
    const auto ids = publish_many(db_.url(), "TestRequested", R"({"db": true, "sleep_ms": 1500, "ignore_cancel": true})", 1);
    auto options = fast_options(db_.url(), "h1");
    options.lease_duration = 60s;  // no heartbeat or rescue during the test
    TestHost host(options, {OUTBOX_FIXTURE_SCRIPTED});
    host.start();
    ASSERT_TRUE(wait_until([&] { return status_of(ids[0]) == "PROCESSING"; }, 10s));
    // Another host takes the event over while the handler is still running.
    db_.exec("UPDATE event_publication SET lease_owner = 'other-host', lease_token = gen_random_uuid(), "
             "version = version + 1");
    const std::string version_after_takeover = db_.scalar("SELECT version FROM event_publication");
    // The fence finds the loss when the handler returns (1.5 s); the heartbeat never runs.
    ASSERT_TRUE(wait_until([&] { return host.metrics().leases_lost() > 0; }, 10s));
    host.stop();
    EXPECT_EQ(host.metrics().leases_lost(), 1u) << "one lost lease, counted once";
    EXPECT_EQ(count("SELECT count(*) FROM scripted_effect"), 0) << "the stale host's DB effects must roll back";
    EXPECT_EQ(count("SELECT count(*) FROM event_consumption"), 0);
    EXPECT_EQ(status_of(ids[0]), "PROCESSING");
    EXPECT_EQ(db_.scalar("SELECT lease_owner FROM event_publication"), "other-host");
    EXPECT_EQ(db_.scalar("SELECT version FROM event_publication"), version_after_takeover);
}

TEST_F(Worker, ALeaseLossFoundByTheHeartbeatIsCountedOnce) {
    const auto ids = publish_many(db_.url(), "TestRequested", R"({"db": true, "sleep_ms": 2500, "ignore_cancel": true})", 1);
    auto options = fast_options(db_.url(), "h1");
    options.lease_duration = 1500ms;  // a beat every 500 ms
    TestHost host(options, {OUTBOX_FIXTURE_SCRIPTED});
    host.start();
    ASSERT_TRUE(wait_until([&] { return status_of(ids[0]) == "PROCESSING"; }, 10s));
    db_.exec("UPDATE event_publication SET lease_owner = 'other-host', lease_token = gen_random_uuid(), "
             "lease_expires_at = now() + interval '1 hour', version = version + 1");
    ASSERT_TRUE(wait_until([&] { return host.metrics().leases_lost() > 0; }, 5s)) << "the heartbeat finds it";
    // The handler returns at 2.5 s and its attempt ends as lease lost: not a second count.
    ASSERT_TRUE(wait_until([&] { return host.metrics().handler_calls().size() > 0; }, 10s));
    host.stop();
    EXPECT_EQ(host.metrics().leases_lost(), 1u);
    EXPECT_EQ(count("SELECT count(*) FROM scripted_effect"), 0);
}

TEST_F(Worker, HeartbeatKeepsTheLeaseOfAHandlerSlowerThanTheLease) {
    const auto ids = publish_many(db_.url(), "TestRequested", R"({"db": true, "sleep_ms": 5000})", 1);
    auto options = fast_options(db_.url(), "h1");
    // A beat every 2/3 s: one may come over a second late on a loaded machine before the
    // other host could take the lease; a heartbeat that does not run loses it in 2 s.
    options.lease_duration = 2s;
    TestHost slow(options, {OUTBOX_FIXTURE_SCRIPTED});
    TestHost other(options, {OUTBOX_FIXTURE_SCRIPTED});
    slow.start();
    ASSERT_TRUE(wait_until([&] { return status_of(ids[0]) == "PROCESSING"; }, 10s));
    other.start();
    ASSERT_TRUE(wait_until([&] { return status_of(ids[0]) == "COMPLETED"; }, 15s));
    EXPECT_EQ(db_.scalar("SELECT attempt_count FROM event_publication"), "1") << "nobody took the lease over";
    EXPECT_EQ(count("SELECT count(*) FROM scripted_effect"), 1);
    EXPECT_EQ(slow.metrics().leases_lost() + other.metrics().leases_lost(), 0u);
}

// Review F10: one row held locked (here FOR SHARE, as a handler's fence holds it while its
// COMMIT waits) must not stop the heartbeat from extending the host's other leases. Before
// the fix the single extend statement waited on that row, and every other lease ran out.
TEST_F(Worker, HeartbeatExtendsTheOtherLeasesWhileOneRowIsLocked) {
    const auto ids = publish_many(db_.url(), "TestRequested", R"({"sleep_ms": 6000})", 2);
    auto options = fast_options(db_.url(), "h1");
    // A beat every 2 s. The locked row is not extended while it stays locked (it is only
    // reported kept), so the lock must end well inside its lease: it is held for about one
    // beat, against a lease of 6 s.
    options.lease_duration = 6s;
    TestHost host(options, {OUTBOX_FIXTURE_SCRIPTED});
    host.start();
    ASSERT_TRUE(wait_until([&] { return all_in("PROCESSING", 2); }, 10s));
    pqxx::connection locker(db_.url());
    pqxx::work lock(locker);
    lock.exec("SELECT 1 FROM event_publication WHERE event_id = '" + ids[0] + "' FOR SHARE");
    const auto expiry = [&] {
        return db_.scalar("SELECT lease_expires_at::text FROM event_publication WHERE event_id = '" + ids[1] + "'");
    };
    // An extension while the other row stays locked. A beat that locked that row before this
    // test did has committed before `first` is read, so the change seen comes from a beat
    // that met the lock. 5 s is 2.5 beats.
    const std::string first = expiry();
    ASSERT_TRUE(wait_until([&] { return expiry() != first; }, 5s)) << "the heartbeat waited on the locked row";
    EXPECT_EQ(status_of(ids[0]), "PROCESSING") << "the locked row is kept, not lost";
    lock.commit();
    ASSERT_TRUE(wait_until([&] { return all_in("COMPLETED", 2); }, 20s));
    EXPECT_EQ(count("SELECT max(attempt_count) FROM event_publication"), 1) << "no lease ran out";
    EXPECT_EQ(host.metrics().leases_lost(), 0u);
}

// Review F10: an outcome the database refuses on its own (here a trigger refusing one event's
// completion) is isolated by halving its batch and given up alone; the others of its batch
// and every later outcome are stored. Before, the completer retried the whole batch forever.
TEST_F(Worker, AnOutcomeTheDatabaseRefusesIsIsolatedAndTheOthersAreStored) {
    const auto ids = publish_many(db_.url(), "TestRequested", R"({"sleep_ms": 200})", 16);
    const std::string poison = ids[5];
    db_.exec("CREATE FUNCTION test_refuse_completion() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
             "IF TG_OP = 'DELETE' OR NEW.status = 'COMPLETED' THEN RAISE EXCEPTION 'refused by a test trigger'; END IF; "
             "RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END; END $$");
    db_.exec("CREATE TRIGGER test_refuse_completion BEFORE UPDATE OR DELETE ON event_publication FOR EACH ROW "
             "WHEN (OLD.event_id = '" + poison + "') EXECUTE FUNCTION test_refuse_completion()");
    auto options = fast_options(db_.url(), "h1");
    options.concurrency = 16;  // the outcomes finish together and share batches with the refused one
    TestHost host(options, {OUTBOX_FIXTURE_SCRIPTED});
    host.start();
    const std::string others = "SELECT count(*) FROM event_publication WHERE status = 'COMPLETED' AND event_id <> '" + poison + "'";
    // Isolating one outcome among 16 takes at most 5 refused writes, with the database
    // session's back-off between them (0.1 to 1.6 s).
    ASSERT_TRUE(wait_until([&] { return count(others) == 15; }, 20s)) << "outcomes beside the refused one were not stored";
    ASSERT_TRUE(wait_until([&] { return host.metrics().outcomes_refused() >= 1; }, 10s));
    EXPECT_NE(status_of(poison), "COMPLETED");
    const auto later = publish_many(db_.url(), "TestRequested", "{}", 3);
    for (const auto& id : later) {
        EXPECT_TRUE(wait_until([&] { return status_of(id) == "COMPLETED"; }, 10s)) << "the completer moved on";
    }
}

TEST_F(Worker, EventTypeWithoutAnyHandlerStaysPending) {
    const auto handled = publish_many(db_.url(), "TestRequested", "{}", 3);
    const auto unhandled = publish_many(db_.url(), "NobodyHandlesThis", "{}", 3);
    TestHost host(fast_options(db_.url(), "h1"), {OUTBOX_FIXTURE_SCRIPTED});
    host.start();
    ASSERT_TRUE(wait_until([&] { return all_in("COMPLETED", 3); }, 10s));
    // Another claim pass after the first, with the unhandled events older than its event.
    const auto later = publish_many(db_.url(), "TestRequested", "{}", 1);
    ASSERT_TRUE(wait_until([&] { return status_of(later[0]) == "COMPLETED"; }, 10s)) << "the host is running";
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE event_type = 'NobodyHandlesThis' "
                    "AND status = 'PENDING' AND attempt_count = 0"),
              3);
}

TEST_F(Worker, GracefulStopReleasesClaimedEventsNoHandlerStarted) {
    publish_many(db_.url(), "TestRequested", R"({"sleep_ms": 400})", 6);
    auto options = fast_options(db_.url(), "h1");
    options.concurrency = 1;  // one running, one queued
    TestHost host(options, {OUTBOX_FIXTURE_SCRIPTED});
    host.start();
    ASSERT_TRUE(wait_until([&] { return all_in("PROCESSING", 2); }, 10s));
    EXPECT_TRUE(host.stop());
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE status = 'PROCESSING'"), 0);
    EXPECT_GE(count("SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'"), 1);
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE status = 'PENDING' AND attempt_count = 0"),
              count("SELECT count(*) FROM event_publication WHERE status <> 'COMPLETED'"))
        << "released events keep their attempt budget";
}

TEST_F(Worker, DisabledHostClaimsNothing) {
    publish_many(db_.url(), "TestRequested", "{}", 3);
    auto options = fast_options(db_.url(), "h1");
    options.enabled = false;
    TestHost host(options, {OUTBOX_FIXTURE_SCRIPTED});
    host.start();
    // The host runs: its fleet row says it is disabled, and it beats twice (every 1.7 s).
    const auto beat = [&] {
        return db_.scalar("SELECT coalesce((SELECT last_heartbeat_at::text FROM outbox_host WHERE host_id = 'h1' "
                          "AND NOT enabled), '')");
    };
    ASSERT_TRUE(wait_until([&] { return !beat().empty(); }, 10s));
    const std::string first = beat();
    ASSERT_TRUE(wait_until([&] { return beat() != first; }, 10s));
    EXPECT_TRUE(all_in("PENDING", 3));
    EXPECT_EQ(host.metrics().events_claimed(), 0u);
}

TEST_F(Worker, NotifyWakesTheHostLongBeforeThePollInterval) {
    auto options = fast_options(db_.url(), "h1");
    options.poll_interval = 30s;
    TestHost host(options, {OUTBOX_FIXTURE_SCRIPTED});
    host.start();
    // The listener is up and the scheduler's first claim pass is done: from now on only a
    // NOTIFY can wake it before 30 s.
    ASSERT_TRUE(wait_until([&] {
        return count("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'outboxd h1' AND "
                     "query LIKE 'LISTEN%'") == 1 &&
               count("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'outboxd h1' AND "
                     "query LIKE '%SKIP LOCKED%' AND state = 'idle'") >= 1;
    }, 10s));
    const auto ids = publish_many(db_.url(), "TestRequested", "{}", 1);
    EXPECT_TRUE(wait_until([&] { return status_of(ids[0]) == "COMPLETED"; }, 10s))
        << "with a 30s poll interval only NOTIFY can have woken the host";
}

}  // namespace
}  // namespace outbox::test
