// Per-aggregate ordering under faults: four real outboxd processes, 2,000 aggregates,
// 50,000 events published while the hosts run, random retryable failures and kill -9s.
// Every handler start is recorded; per aggregate, the starts (a retried attempt repeats
// the same event) must be exactly the publish-commit order.
#include <gtest/gtest.h>

#include <array>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <thread>

#include <signal.h>

#include <pqxx/pqxx>

#include "db/pg_array.hpp"
#include "fault/fault_fixture.hpp"
#include "support/pg_fixture.hpp"
#include "support/test_host.hpp"

namespace outbox::test::fault {
namespace {

using namespace std::chrono_literals;

constexpr int kAggregates = 2'000;
constexpr int kEvents = 50'000;
constexpr int kPublishers = 4;
constexpr int kBatch = 50;

/// Publisher `p` owns the aggregates whose number is p modulo kPublishers, so the commit
/// order of an aggregate's events is the order this thread committed them in (and, within
/// one transaction, statement order). Returns each owned aggregate's event ids in that order.
std::map<std::string, std::vector<std::string>> publish_owned(const std::string& url, int p, unsigned seed) {
    std::map<std::string, std::vector<std::string>> order;
    std::mt19937 random(seed);
    std::uniform_int_distribution<int> pick(0, kAggregates / kPublishers - 1);
    pqxx::connection conn(url);
    for (int done = 0; done < kEvents / kPublishers; done += kBatch) {
        std::vector<std::string> keys;
        for (int i = 0; i < kBatch; ++i) keys.push_back("agg-" + std::to_string(pick(random) * kPublishers + p));
        pqxx::work tx(conn);
        // unnest() yields the keys in array order, and the calls run in that order.
        const pqxx::result ids = tx.exec_params(
            "SELECT outbox_publish('acme', 'OrderedStep', '{}', k)::text FROM unnest($1::text[]) AS u(k)",
            db::pg_array(keys));
        tx.commit();
        for (std::size_t i = 0; i < keys.size(); ++i) order[keys[i]].emplace_back(ids[static_cast<int>(i)][0].c_str());
        std::this_thread::sleep_for(2ms);  // spread publishing over the run
    }
    return order;
}

TEST(OrderingFaults, FourHostsWithFailuresAndKillsStartEveryAggregatesEventsInCommitOrder) {
    constexpr int kKills = 4;
    TestDatabase db;
    TempDir dir;
    const auto record = dir.path() / "starts.txt";
    const Fleet fleet(db.url(),
                      {{"OUTBOX_LEASE_DURATION", "2s"},
                       {"OUTBOX_CONCURRENCY", "8"},
                       {"OUTBOX_BATCH_SIZE", "50"},
                       {"OUTBOX_POLL_INTERVAL", "200ms"},
                       {"OUTBOX_INITIAL_BACKOFF", "50ms"},
                       {"OUTBOX_MAX_BACKOFF", "200ms"},
                       {"OUTBOX_MAX_ATTEMPTS", "30"}},
                      {OUTBOX_FIXTURE_ORDERED_RECORDER},
                      "  ordered-recorder:\n    config: {file: \"" + record.string() + "\", fail_percent: 10}\n");
    std::array<std::unique_ptr<ChildProcess>, 4> hosts;
    const auto name = [](std::size_t i) { return "host-" + std::to_string(i); };
    for (std::size_t i = 0; i < hosts.size(); ++i) hosts[i] = fleet.start(name(i));

    const auto seed = std::random_device{}();
    std::cout << "seed: " << seed << "\n";
    std::array<std::map<std::string, std::vector<std::string>>, kPublishers> owned;
    std::vector<std::thread> publishers;
    for (int p = 0; p < kPublishers; ++p) {
        publishers.emplace_back([&, p] { owned[static_cast<std::size_t>(p)] = publish_owned(db.url(), p, seed + p); });
    }

    std::mt19937 random(seed);
    std::uniform_int_distribution<int> pause_ms(1000, 3000);
    std::uniform_int_distribution<std::size_t> pick(0, hosts.size() - 1);
    for (int kill = 0; kill < kKills; ++kill) {
        std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms(random)));
        const std::size_t victim = pick(random);
        ASSERT_GT(unsettled(db.url()), 0) << "kill " << kill << " must land mid-run";
        hosts[victim]->signal(SIGKILL);
        ASSERT_EQ(hosts[victim]->wait(10s), std::optional<int>(128 + SIGKILL));
        hosts[victim] = fleet.start(name(victim));
    }
    for (auto& t : publishers) t.join();

    const bool settled = wait_until([&] { return unsettled(db.url()) == 0; }, 150s);
    ASSERT_TRUE(settled) << status_summary(db.url());
    for (std::size_t i = 0; i < hosts.size(); ++i) stop_cleanly(fleet, *hosts[i], name(i));
    EXPECT_EQ(count(db.url(), "SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'"), kEvents);

    std::map<std::string, std::vector<std::string>> starts;
    std::size_t lines = 0;
    {
        std::ifstream in(record);
        std::string key, id;
        int attempt = 0;
        while (in >> key >> id >> attempt) {
            ++lines;
            auto& seen = starts[key];
            if (seen.empty() || seen.back() != id) seen.push_back(id);  // a retry repeats the same event
        }
    }
    EXPECT_GT(lines, static_cast<std::size_t>(kEvents)) << "failures and kills really caused repeated starts";
    std::size_t aggregates = 0;
    int wrong = 0;
    for (const auto& by_publisher : owned) {
        for (const auto& [key, expected] : by_publisher) {
            ++aggregates;
            if (starts[key] != expected && ++wrong <= 5) {
                ADD_FAILURE() << key << ": handler starts differ from the publish-commit order (" << starts[key].size()
                              << " distinct runs for " << expected.size() << " events)";
            }
        }
    }
    EXPECT_EQ(wrong, 0) << "aggregates whose events did not start in commit order";
    EXPECT_GT(aggregates, static_cast<std::size_t>(kAggregates) * 9 / 10);
}

}  // namespace
}  // namespace outbox::test::fault
