// Publishing several keyed events in one transaction: outbox_publish_many() and the C++
// publish_many() take the aggregates' ordering locks in one order, so publishers that share
// aggregates never deadlock, and each aggregate's events keep the commit order.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "outbox/publisher.hpp"
#include "support/pg_fixture.hpp"

namespace {

using namespace std::chrono_literals;
using outbox::test::TestDatabase;
using ::testing::HasSubstr;

const outbox::sdk::PayloadSchema kStep{{"step", outbox::sdk::FieldKind::Integer}};

outbox::sdk::PublishItem step(int n, std::optional<std::string> key, std::optional<std::string> dedup = {}) {
    outbox::sdk::SafePayload payload{kStep};
    payload.set("step", n);
    return {"OrderedStep", payload, {.aggregate_key = std::move(key), .dedup_key = std::move(dedup)}};
}

TEST(PublishMany, ReturnsIdsInInputOrderAndKeepsEachAggregatesInputOrder) {
    const TestDatabase db;
    pqxx::connection conn{db.url()};
    pqxx::work tx{conn};
    const std::vector<std::string> ids = outbox::sdk::publish_many(
        tx, "acme", {step(1, "b"), step(2, std::nullopt), step(3, "a"), step(4, "b"), step(5, "a")});
    tx.commit();
    ASSERT_EQ(ids.size(), 5U);
    for (std::size_t i = 0; i < ids.size(); ++i) {
        EXPECT_EQ(db.scalar("SELECT payload->>'step' FROM event_publication WHERE event_id = '" + ids[i] + "'"),
                  std::to_string(i + 1))
            << "id " << i << " must be the event given at that position";
    }
    EXPECT_EQ(db.scalar("SELECT string_agg(payload->>'step', ',' ORDER BY aggregate_seq) FROM event_publication "
                        "WHERE aggregate_key = 'a'"),
              "3,5");
    EXPECT_EQ(db.scalar("SELECT string_agg(payload->>'step', ',' ORDER BY aggregate_seq) FROM event_publication "
                        "WHERE aggregate_key = 'b'"),
              "1,4");
}

TEST(PublishMany, AppliesOutboxPublishChecksAndInsertsNothingWhenOneEventIsRefused) {
    const TestDatabase db;
    const auto refused = [&](const std::string& events, const std::string& expected) {
        pqxx::connection conn{db.url()};
        pqxx::work tx{conn};
        try {
            tx.exec_params("SELECT * FROM outbox_publish_many('acme', $1::jsonb)", events);
            ADD_FAILURE() << "outbox_publish_many accepted " << events;
        } catch (const pqxx::sql_error& e) {
            EXPECT_EQ(e.sqlstate(), "22023") << e.what();
            EXPECT_THAT(e.what(), HasSubstr(expected)) << events;
        }
    };
    refused(R"({"event_type": "A"})", "events must be a JSON array");
    refused(R"([{"event_type": "Good", "payload": {}}, 7])", "event 2 is not a JSON object");
    refused(R"([{"event_type": "Good", "payload": {}, "aggregateKey": "k"}])", "unknown field \"aggregateKey\"");
    refused(R"([{"payload": {}}])", "event 1 needs event_type");
    refused(R"([{"event_type": "Good", "payload": {}, "aggregate_key": 5}])", "not a string or null");
    refused(R"([{"event_type": "Good", "payload": {}, "aggregate_key": "k"}, {"event_type": "bad", "payload": {}}])",
            "outbox_publish: event_type must be PascalCase");
    refused(R"([{"event_type": "Good", "payload": {"n": {"nested": 1}}}])", "is nested");
    refused(R"([{"event_type": "Good", "payload": {}, "aggregate_key": "ann@example.com"}])",
            "outbox_publish: aggregate_key");
    EXPECT_EQ(db.scalar("SELECT count(*) FROM event_publication"), "0");
    EXPECT_EQ(db.scalar("SELECT count(*) FROM outbox_aggregate"), "0");
    EXPECT_EQ(db.scalar("SELECT count(*) FROM outbox_publish_many('acme', '[]')"), "0");
}

TEST(PublishMany, ARepeatedDedupKeyAnswersTheFirstEventsIdAtItsPosition) {
    const TestDatabase db;
    pqxx::connection conn{db.url()};
    pqxx::work tx{conn};
    const auto first = outbox::sdk::publish_many(tx, "acme", {step(1, "k", "d-1")});
    const auto again = outbox::sdk::publish_many(tx, "acme", {step(2, "j"), step(3, "k", "d-1")});
    tx.commit();
    ASSERT_EQ(again.size(), 2U);
    EXPECT_EQ(again[1], first[0]);
    EXPECT_EQ(db.scalar("SELECT count(*) FROM event_publication"), "2");
}

// Eight publishers share 50 aggregates; each transaction publishes a random subset of them,
// in random order (sometimes twice to one aggregate), in one batch, for 30 seconds. With
// outbox_publish() calls in that order, two transactions soon wait for each other (40P01).
// Commit order is observed through a sequence read after the batch: a transaction that
// shares an aggregate with an earlier one gets the aggregate's lock only after that one
// committed, so it reads a larger number.
TEST(PublishMany, EightPublishersOnSharedAggregatesNeverDeadlockAndKeepCommitOrder) {
    constexpr int kPublishers = 8;
    constexpr int kAggregates = 50;
    constexpr auto kRun = 30s;
    const TestDatabase db;
    db.exec("CREATE SEQUENCE test_commit_stamp");

    struct Published {
        long long stamp;
        std::vector<std::string> keys;
        std::vector<std::string> ids;
    };
    std::vector<std::vector<Published>> published(kPublishers);
    std::atomic<int> deadlocks{0};
    std::atomic<int> other_failures{0};
    const auto seed = std::random_device{}();
    const auto until = std::chrono::steady_clock::now() + kRun;
    std::vector<std::thread> threads;
    for (int p = 0; p < kPublishers; ++p) {
        threads.emplace_back([&, p] {
            std::mt19937 random(seed + static_cast<unsigned>(p));
            std::vector<int> all(kAggregates);
            std::iota(all.begin(), all.end(), 0);
            pqxx::connection conn{db.url()};
            int n = 0;
            while (std::chrono::steady_clock::now() < until) {
                std::shuffle(all.begin(), all.end(), random);
                const auto size = std::uniform_int_distribution<std::size_t>(2, 12)(random);
                std::vector<std::string> keys;
                std::vector<outbox::sdk::PublishItem> items;
                for (std::size_t i = 0; i < size; ++i) {
                    keys.push_back("agg-" + std::to_string(all[i]));
                    if (random() % 4 == 0) keys.push_back(keys.back());
                }
                for (const auto& key : keys) items.push_back(step(++n, key));
                try {
                    pqxx::work tx{conn};
                    auto ids = outbox::sdk::publish_many(tx, "acme", items);
                    const auto stamp = tx.exec1("SELECT nextval('test_commit_stamp')")[0].as<long long>();
                    tx.commit();
                    published[static_cast<std::size_t>(p)].push_back({stamp, std::move(keys), std::move(ids)});
                } catch (const pqxx::deadlock_detected&) {
                    ++deadlocks;
                } catch (const std::exception&) {
                    ++other_failures;
                }
            }
        });
    }
    for (auto& thread : threads) thread.join();
    EXPECT_EQ(deadlocks.load(), 0) << "seed " << seed;
    EXPECT_EQ(other_failures.load(), 0) << "seed " << seed;

    // Per aggregate, the expected order: by commit stamp, then position in the batch.
    std::map<std::string, std::vector<std::pair<std::pair<long long, std::size_t>, std::string>>> expected;
    std::size_t total = 0;
    for (const auto& batches : published) {
        for (const auto& batch : batches) {
            ASSERT_EQ(batch.ids.size(), batch.keys.size());
            for (std::size_t i = 0; i < batch.keys.size(); ++i) {
                expected[batch.keys[i]].push_back({{batch.stamp, i}, batch.ids[i]});
            }
            total += batch.ids.size();
        }
    }
    std::cout << "seed " << seed << ": " << total << " events published\n";
    ASSERT_GT(total, 1000U) << "the run published too little to show anything";
    EXPECT_EQ(db.scalar("SELECT count(*) FROM event_publication"), std::to_string(total)) << "every event present";
    std::map<std::string, std::vector<std::string>> stored;
    for (const auto& row : db.exec("SELECT aggregate_key, event_id::text FROM event_publication "
                                   "ORDER BY aggregate_key, aggregate_seq")) {
        stored[row[0].as<std::string>()].push_back(row[1].as<std::string>());
    }
    for (auto& [key, events] : expected) {
        std::sort(events.begin(), events.end());
        std::vector<std::string> ids;
        for (const auto& event : events) ids.push_back(event.second);
        EXPECT_EQ(stored[key], ids) << key << ": the aggregate's order is not the commit order (seed " << seed << ")";
    }
    EXPECT_EQ(db.scalar("SELECT count(*) FROM (SELECT aggregate_key FROM event_publication GROUP BY aggregate_key "
                        "HAVING max(aggregate_seq) <> count(*)) gaps"),
              "0")
        << "positions 1..n without gaps";
}

}  // namespace
