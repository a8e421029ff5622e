// Per-aggregate ordering against a real PostgreSQL and real hosts: events of one
// (company_id, aggregate_key) start in the commit order of their publishing transactions;
// a REVIEW_REQUIRED event holds back exactly its successors until an operator retries or
// discards it; other aggregates and unkeyed events keep running.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include <pqxx/pqxx>

#include "app/commands.hpp"
#include "operations/discard_service.hpp"
#include "operations/event_query.hpp"
#include "operations/retry_service.hpp"
#include "support/ordered_recorder.hpp"
#include "support/pg_fixture.hpp"
#include "support/temp_dir.hpp"
#include "support/test_host.hpp"

namespace outbox::test {
namespace {

using namespace std::chrono_literals;

class Ordering : public ::testing::Test {
protected:
    long long count(const std::string& sql) const { return std::stoll(db_.scalar(sql)); }
    std::string status_of(const std::string& id) const {
        return db_.scalar("SELECT status FROM event_publication WHERE event_id = '" + id + "'");
    }

    /// Publishes one OrderedStep event in its own transaction; empty key: no aggregate.
    std::string publish(const std::string& key, const std::string& payload = "{}") const {
        pqxx::connection conn(db_.url());
        pqxx::work tx(conn);
        const auto id = tx.exec_params1("SELECT outbox_publish('acme', 'OrderedStep', $1::jsonb, $2)::text", payload,
                                        key.empty() ? std::optional<std::string>() : std::optional<std::string>(key))[0]
                            .as<std::string>();
        tx.commit();
        return id;
    }

    std::unique_ptr<TestHost> start_host(const std::string& id = "h1", int fail_percent = 0,
                                         std::chrono::milliseconds lease = 5s) const {
        auto options = fast_options(db_.url(), id);
        options.lease_duration = lease;
        // Failures on purpose must not use up the attempts: 20 % five times in a row happens
        // to one event in 600.
        if (fail_percent > 0) options.max_attempts = 25;
        return start_ordered_recorder(options, record_, fail_percent);
    }

    std::map<std::string, std::vector<std::string>> starts() const { return ordered_starts(record_); }

    std::optional<nlohmann::json> blocked_by(const std::string& id) const {
        pqxx::connection conn(db_.url());
        const auto event = operations::EventQuery(conn).get("acme", id);
        if (!event) return std::nullopt;
        return (*event)["blocked_by"];
    }

    long long version_of(const std::string& id) const {
        return count("SELECT version FROM event_publication WHERE event_id = '" + id + "'");
    }

    /// x1 (reviewed), x2, x3 of aggregate user-x; y1..y3 of user-y and three unkeyed events
    /// that run meanwhile. Returns {x1, x2, x3}.
    std::vector<std::string> reviewed_head_scenario() const {
        std::vector<std::string> x{publish("user-x", R"({"review": true})"), publish("user-x"), publish("user-x")};
        for (int i = 0; i < 3; ++i) publish("user-y");
        for (int i = 0; i < 3; ++i) publish("");
        return x;
    }

    TestDatabase db_;
    TempDir dir_;
    std::filesystem::path record_ = dir_.path() / "starts.txt";
};

TEST_F(Ordering, AReviewedEventBlocksExactlyItsSuccessorsAndARetryReleasesThemInOrder) {
    const auto x = reviewed_head_scenario();
    const auto host = start_host();
    ASSERT_TRUE(wait_until([&] { return status_of(x[0]) == "REVIEW_REQUIRED"; }, 20s));
    ASSERT_TRUE(wait_until(
        [&] { return count("SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'") == 6; }, 20s))
        << "the other aggregate and the unkeyed events run while user-x waits";
    // A later unkeyed event completing proves further claim passes ran past the blocked ones.
    const auto later = publish("", "{}");
    ASSERT_TRUE(wait_until([&] { return status_of(later) == "COMPLETED"; }, 20s));
    EXPECT_EQ(status_of(x[1]), "PENDING");
    EXPECT_EQ(status_of(x[2]), "PENDING");
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE attempt_count > 0 AND event_id IN ('" + x[1] + "', '" +
                    x[2] + "')"),
              0)
        << "no successor of a reviewed event is ever claimed";
    EXPECT_EQ(blocked_by(x[1]), nlohmann::json(x[0]));
    EXPECT_EQ(blocked_by(x[2]), nlohmann::json(x[0])) << "blocked_by names the earliest unfinished event";
    EXPECT_EQ(blocked_by(x[0]), nlohmann::json(nullptr));

    // The cause is fixed (the payload no longer asks for review) and the operator retries.
    db_.exec("UPDATE event_publication SET payload = '{}' WHERE event_id = '" + x[0] + "'");
    pqxx::connection conn(db_.url());
    operations::RetryRequest request{x[0], version_of(x[0]), "fixed the remote endpoint", "key-1", "alice", "acme", "api"};
    ASSERT_TRUE(std::holds_alternative<operations::RetryAccepted>(operations::RetryService(conn).retry(request)));
    ASSERT_TRUE(wait_until([&] { return status_of(x[2]) == "COMPLETED"; }, 20s));
    EXPECT_EQ(status_of(x[0]), "COMPLETED");
    EXPECT_EQ(status_of(x[1]), "COMPLETED");
    EXPECT_EQ(starts()["user-x"], (std::vector<std::string>{x[0], x[0], x[1], x[2]}))
        << "the reviewed event runs again first, then its successors in order";
    EXPECT_EQ(starts()["user-y"].size(), 3u);
    EXPECT_EQ(starts()[""].size(), 4u);
}

TEST_F(Ordering, DiscardingAReviewedEventReleasesItsSuccessorsAndItNeverRunsAgain) {
    const auto x = reviewed_head_scenario();
    const auto host = start_host();
    ASSERT_TRUE(wait_until([&] { return status_of(x[0]) == "REVIEW_REQUIRED"; }, 20s));
    ASSERT_TRUE(wait_until(
        [&] { return count("SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'") == 6; }, 20s));
    EXPECT_EQ(blocked_by(x[1]), nlohmann::json(x[0]));

    pqxx::connection conn(db_.url());
    operations::DiscardRequest request{x[0], version_of(x[0]), "the user account was deleted", "key-d", "alice", "acme", "api"};
    const auto result = operations::DiscardService(conn).discard(request);
    ASSERT_TRUE(std::holds_alternative<operations::DiscardAccepted>(result));
    ASSERT_TRUE(wait_until([&] { return status_of(x[2]) == "COMPLETED"; }, 20s));
    EXPECT_EQ(status_of(x[0]), "DISCARDED");
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE completed_at IS NOT NULL AND event_id = '" + x[0] + "'"),
              1);
    EXPECT_EQ(starts()["user-x"], (std::vector<std::string>{x[0], x[1], x[2]}))
        << "the discarded event never runs again; its successors run in order";
    EXPECT_EQ(blocked_by(x[1]), nlohmann::json(nullptr));
}

// Four connections publish to one aggregate at once; the test commits whichever
// transaction has returned from outbox_publish, always the latest one first. With the
// aggregate's row lock only one transaction at a time gets that far, so the commit order
// is the order the test saw; without it, several would and the latest-first commit order
// would differ from the order they inserted in.
TEST_F(Ordering, ConcurrentPublishersToOneAggregateRunInCommitOrder) {
    constexpr int kConnections = 4;
    constexpr int kRounds = 8;
    std::mutex mutex;
    std::condition_variable changed;
    std::vector<std::pair<int, std::string>> published;  // (connection, event id) waiting for their commit
    std::map<int, bool> commit_now;
    std::vector<std::string> commit_order;
    std::vector<std::thread> publishers;
    for (int c = 0; c < kConnections; ++c) {
        publishers.emplace_back([&, c] {
            pqxx::connection conn(db_.url());
            for (int round = 0; round < kRounds; ++round) {
                pqxx::work tx(conn);
                const auto id = tx.exec1("SELECT outbox_publish('acme', 'OrderedStep', '{}', 'shared')::text")[0]
                                    .as<std::string>();
                std::unique_lock lock(mutex);
                published.emplace_back(c, id);
                changed.notify_all();
                changed.wait(lock, [&] { return commit_now[c]; });
                commit_now[c] = false;
                lock.unlock();
                tx.commit();
                lock.lock();
                commit_order.push_back(id);
                changed.notify_all();
            }
        });
    }
    for (int n = 0; n < kConnections * kRounds; ++n) {
        std::unique_lock lock(mutex);
        ASSERT_TRUE(changed.wait_for(lock, 20s, [&] { return !published.empty(); }));
        // Give any other transaction that could get past outbox_publish a moment to do so.
        lock.unlock();
        std::this_thread::sleep_for(20ms);
        lock.lock();
        const auto [c, id] = published.back();
        published.pop_back();
        const auto committed = commit_order.size();
        commit_now[c] = true;
        changed.notify_all();
        ASSERT_TRUE(changed.wait_for(lock, 20s, [&] { return commit_order.size() > committed; }));
    }
    for (auto& t : publishers) t.join();

    std::vector<std::string> by_seq;
    pqxx::connection conn(db_.url());
    pqxx::read_transaction tx(conn);
    for (const auto& row : tx.exec("SELECT event_id::text FROM event_publication ORDER BY aggregate_seq")) {
        by_seq.emplace_back(row[0].c_str());
    }
    tx.commit();
    EXPECT_EQ(by_seq, commit_order) << "the aggregate position follows the commit order";

    const auto host = start_host();
    ASSERT_TRUE(wait_until(
        [&] { return count("SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'") == kConnections * kRounds; },
        30s));
    EXPECT_EQ(starts()["shared"], commit_order) << "handlers start in the commit order";
}

// A transaction that began first (earlier occurred_at) but commits after another publisher
// of the same aggregate comes second: insertion time is not the order.
TEST_F(Ordering, ALaterCommitRunsLaterEvenWhenItsTransactionBeganFirst) {
    pqxx::connection early_conn(db_.url());
    pqxx::work early(early_conn);
    early.exec("SELECT now()");  // the transaction's timestamp is fixed here
    std::this_thread::sleep_for(5ms);
    const auto first = publish("order-1");
    const auto second = early.exec1("SELECT outbox_publish('acme', 'OrderedStep', '{}', 'order-1')::text")[0].as<std::string>();
    early.commit();
    EXPECT_EQ(count("SELECT count(*) FROM event_publication a, event_publication b WHERE a.event_id = '" + second +
                    "' AND b.event_id = '" + first + "' AND a.occurred_at < b.occurred_at"),
              1)
        << "the second event carries the earlier timestamp";
    const auto host = start_host();
    ASSERT_TRUE(wait_until([&] { return status_of(second) == "COMPLETED"; }, 20s));
    EXPECT_EQ(starts()["order-1"], (std::vector<std::string>{first, second}));
}

TEST_F(Ordering, OutboxdStatusCountsTheBlockedEventsAndDoesNotCallThemUnhandled) {
    const auto head = publish("user-x");
    const auto second = publish("user-x");
    const auto third = publish("user-x");
    publish("user-y");
    db_.exec("UPDATE event_publication SET occurred_at = now() - interval '10 minutes', next_attempt_at = now() - "
             "interval '10 minutes'");
    db_.exec("UPDATE event_publication SET status = 'REVIEW_REQUIRED', attempt_count = 1 WHERE event_id = '" + head + "'");
    config::Config config;
    config.database.url = db_.url();
    testing::internal::CaptureStdout();
    const int code = app::status_command(config);
    const std::string output = testing::internal::GetCapturedStdout();
    EXPECT_EQ(code, 0);
    EXPECT_NE(output.find("blocked behind an earlier event of their aggregate: 2 event(s)"), std::string::npos)
        << output;
    // user-y's event (not blocked, never claimed) is reported unhandled; user-x's two are waiting, not lost.
    EXPECT_NE(output.find("OrderedStep                     1 event(s)"), std::string::npos) << output;
    EXPECT_EQ(blocked_by(second), nlohmann::json(head));
    EXPECT_EQ(blocked_by(third), nlohmann::json(head)) << "the earliest unfinished event, not the one just before";
    EXPECT_EQ(blocked_by(head), nlohmann::json(nullptr));
}

// A PENDING head whose type no loaded handler supports (a removed plugin, a misspelt type)
// would hold back its aggregate forever: `outboxd status` names it, and an operator's
// discard (PENDING is discardable, PROCESSING never) releases its 100 successors in order.
TEST_F(Ordering, AnUnhandledHeadIsNamedByStatusAndDiscardingItReleasesItsHundredSuccessorsInOrder) {
    constexpr int kSuccessors = 100;
    std::string head;
    std::vector<std::string> successors;
    {
        pqxx::connection conn(db_.url());
        pqxx::work tx(conn);
        head = tx.exec1("SELECT outbox_publish('acme', 'RemovedPluginType', '{}', 'user-x')::text")[0].as<std::string>();
        // generate_series yields 1..100 in order and the calls run in that order.
        for (const auto& row : tx.exec_params("SELECT outbox_publish('acme', 'OrderedStep', '{}', 'user-x')::text "
                                              "FROM generate_series(1, $1) AS s(n) ORDER BY n",
                                              kSuccessors)) {
            successors.push_back(row[0].as<std::string>());
        }
        tx.commit();
    }
    const auto host = start_host();
    const auto unkeyed = publish("");
    ASSERT_TRUE(wait_until([&] { return status_of(unkeyed) == "COMPLETED"; }, 20s));
    ASSERT_TRUE(wait_until([&] { return count("SELECT count(*) FROM outbox_host WHERE stopped_at IS NULL") > 0; }, 20s));
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE aggregate_key = 'user-x' AND attempt_count > 0"), 0)
        << "nothing of the blocked aggregate runs while its head waits";

    config::Config config;
    config.database.url = db_.url();
    testing::internal::CaptureStdout();
    EXPECT_EQ(app::status_command(config), 0);
    const std::string output = testing::internal::GetCapturedStdout();
    const auto section = output.find("HEADS BLOCKING THEIR AGGREGATE THAT NO LIVE HOST HANDLES");
    ASSERT_NE(section, std::string::npos) << output;
    const auto line_start = output.find(head, section);
    ASSERT_NE(line_start, std::string::npos) << "status names the head\n" << output;
    const std::string line = output.substr(line_start, output.find('\n', line_start) - line_start);
    EXPECT_NE(line.find("RemovedPluginType"), std::string::npos) << line;
    EXPECT_NE(line.find("PENDING"), std::string::npos) << line;
    EXPECT_NE(line.find("100 successor(s) waiting"), std::string::npos) << line;

    pqxx::connection conn(db_.url());
    operations::DiscardRequest request{head, version_of(head), "the plugin for this type was removed", "key-h",
                                       "alice", "acme", "api"};
    ASSERT_TRUE(std::holds_alternative<operations::DiscardAccepted>(operations::DiscardService(conn).discard(request)));
    EXPECT_EQ(count("SELECT count(*) FROM outbox_discard WHERE event_id = '" + head +
                    "' AND previous_status = 'PENDING'"),
              1);
    ASSERT_TRUE(wait_until([&] { return status_of(successors.back()) == "COMPLETED"; }, 30s));
    EXPECT_EQ(status_of(head), "DISCARDED");
    EXPECT_EQ(starts()["user-x"], successors) << "the successors run once each, in publish order; the head never";
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE aggregate_key = 'user-x' AND status = 'COMPLETED'"),
              kSuccessors);
}

// A handler that uses ctx.db() completes the event in its own transaction (the fence); the
// host then claims the aggregate's next event at once (its workers wake the scheduler after
// every event), not at its next poll.
TEST_F(Ordering, ACompletionInTheHandlersTransactionWakesTheHostForTheNextEventOfItsAggregate) {
    create_scripted_effect_table(db_.url());
    std::vector<std::string> ids;
    {
        pqxx::connection conn(db_.url());
        pqxx::work tx(conn);
        for (int i = 0; i < 3; ++i) {
            ids.push_back(tx.exec1("SELECT outbox_publish('acme', 'TestRequested', '{\"db\": true}', 'k')::text")[0]
                              .as<std::string>());
        }
        tx.commit();
    }
    auto options = fast_options(db_.url(), "h1");
    options.poll_interval = 1h;
    TestHost host(options, {OUTBOX_FIXTURE_SCRIPTED});
    host.start();
    EXPECT_TRUE(wait_until([&] { return status_of(ids[2]) == "COMPLETED"; }, 20s))
        << "with an hour's poll interval only the completion can have woken the host for each next event";
    EXPECT_EQ(count("SELECT count(*) FROM scripted_effect"), 3) << "each completed in its handler's transaction";
}

// Review F10: a completion wakes the hosts that handle the successor it releases. Host h2
// handles only the successor's type and polls once an hour; before the fix it heard nothing
// when h1 completed the head, and the successor waited for the next poll.
TEST_F(Ordering, ACompletionWakesTheHostThatHandlesOnlyTheSuccessorItReleases) {
    auto options = fast_options(db_.url(), "h2");
    options.poll_interval = 1h;
    TestHost successor_host(options, {OUTBOX_FIXTURE_SCRIPTED});
    successor_host.start();
    ASSERT_TRUE(wait_until([&] { return count("SELECT count(*) FROM pg_stat_activity WHERE query ILIKE 'LISTEN%'") >= 1; }, 10s))
        << "h2 never listened";
    const auto head = publish("k");
    std::string successor;
    {
        pqxx::connection conn(db_.url());
        pqxx::work tx(conn);
        successor = tx.exec1("SELECT outbox_publish('acme', 'TestRequested', '{}', 'k')::text")[0].as<std::string>();
        tx.commit();
    }
    // h2's first poll at start found nothing due; only a notification can wake it before an hour.
    const auto head_host = start_host("h1");
    ASSERT_TRUE(wait_until([&] { return status_of(head) == "COMPLETED"; }, 20s));
    EXPECT_TRUE(wait_until([&] { return status_of(successor) == "COMPLETED"; }, 10s))
        << "the host handling the successor was not woken by the head's completion";
}

// Review F8 under load: two hosts park the successors of 20 aggregates while their heads
// fail and retry, the finishes release them one by one, and publishers keep adding to the
// same aggregates. Every event completes, each aggregate in its commit order, and nothing
// stays parked. The leases last a minute, so the sweep (every half lease) cannot stand in
// for a release the finishes failed to make within the 25 s this test waits.
TEST_F(Ordering, ManyAggregatesRunInCommitOrderWhileTwoHostsParkAndReleaseTheirSuccessors) {
    constexpr int kAggregates = 20;
    constexpr int kBacklog = 20;  // per aggregate, before the hosts start
    constexpr int kLater = 5;     // per aggregate, while they run
    const auto publish_round = [&](int per_aggregate) {
        pqxx::connection conn(db_.url());
        pqxx::work tx(conn);
        for (int i = 0; i < per_aggregate; ++i) {
            for (int a = 0; a < kAggregates; ++a) {
                tx.exec_params("SELECT outbox_publish('acme', 'OrderedStep', '{}', $1)", "agg-" + std::to_string(a));
            }
        }
        tx.commit();
    };
    publish_round(kBacklog);
    std::this_thread::sleep_for(300ms);  // due for longer than the hosts' parking interval

    std::atomic<bool> done{false};
    std::atomic<long long> most_parked{0};
    std::thread sampler([&] {
        pqxx::connection conn(db_.url());
        while (!done) {
            const auto parked =
                pqxx::nontransaction(conn)
                    .exec1("SELECT count(*) FROM event_publication WHERE next_attempt_at = 'infinity'")[0]
                    .as<long long>();
            most_parked = std::max(most_parked.load(), parked);
            std::this_thread::sleep_for(20ms);
        }
    });
    const auto h1 = start_host("h1", 20, 60s);
    const auto h2 = start_host("h2", 20, 60s);
    for (int round = 0; round < kLater; ++round) {
        std::this_thread::sleep_for(100ms);
        publish_round(1);
    }
    const long long total = kAggregates * (kBacklog + kLater);
    const bool all_completed = wait_until(
        [&] { return count("SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'") == total; }, 25s);
    done = true;
    sampler.join();
    ASSERT_TRUE(all_completed) << count("SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'") << " of "
                               << total << " completed; parked now: "
                               << count("SELECT count(*) FROM event_publication WHERE next_attempt_at = 'infinity'");
    // The hosts start on the heads at once and the first pass comes a parking interval later,
    // so how many are parked at one moment depends on the machine; one per aggregate at least.
    EXPECT_GE(most_parked.load(), kAggregates) << "the backlog's successors were parked";

    const auto started = starts();
    pqxx::connection conn(db_.url());
    pqxx::read_transaction tx(conn);
    for (int a = 0; a < kAggregates; ++a) {
        const std::string key = "agg-" + std::to_string(a);
        std::vector<std::string> by_seq;
        for (const auto& row : tx.exec_params("SELECT event_id::text FROM event_publication WHERE aggregate_key = $1 "
                                              "ORDER BY aggregate_seq",
                                              key)) {
            by_seq.emplace_back(row[0].c_str());
        }
        // A failed attempt runs again before anything after it: repeated starts are adjacent.
        std::vector<std::string> in_start_order;
        for (const auto& id : started.at(key)) {
            if (in_start_order.empty() || in_start_order.back() != id) in_start_order.push_back(id);
        }
        EXPECT_EQ(in_start_order, by_seq) << key;
    }
}

TEST_F(Ordering, EventsWithoutAKeyHaveNoPositionAndAreNeverBlocked) {
    const auto blocker = publish("k", R"({"review": true})");
    const auto unkeyed = publish("");
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE aggregate_seq IS NULL AND event_id = '" + unkeyed + "'"),
              1);
    EXPECT_EQ(count("SELECT count(*) FROM outbox_aggregate"), 1) << "only keyed events allocate a position";
    const auto host = start_host();
    ASSERT_TRUE(wait_until([&] { return status_of(unkeyed) == "COMPLETED"; }, 20s));
    ASSERT_TRUE(wait_until([&] { return status_of(blocker) == "REVIEW_REQUIRED"; }, 20s));
    EXPECT_EQ(blocked_by(unkeyed), nlohmann::json(nullptr));
}

}  // namespace
}  // namespace outbox::test
