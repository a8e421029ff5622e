// nats-relay as operators run it: `outboxd run` children with the real .so in their plugin
// directory, a real PostgreSQL and a real nats-server -js (token auth) on 127.0.0.1. While
// the hosts relay keyed events, the NATS server is restarted twice and one host is killed
// with SIGKILL; 250 events are in the stream before their first delivery. Afterwards the
// stream holds every event exactly once (by Nats-Msg-Id), each aggregate's events in the
// order they were published, and outboxd has nothing unfinished.
#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <iostream>
#include <set>
#include <thread>

#include <pqxx/pqxx>

#include "nats_server.hpp"
#include "support/child_process.hpp"
#include "support/pg_fixture.hpp"
#include "support/temp_dir.hpp"
#include "support/test_host.hpp"

namespace outbox::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// The 20,000 events: 17 s on an idle 2-core machine, 35-39 s on one whose load
// average was 5-6 (PostgreSQL, nats-server, two hosts and the publisher share the cores).
constexpr int kEvents = 20000;
constexpr int kAggregates = 400;
constexpr const char* kStream = "OUTBOX";
constexpr const char* kToken = "e2e-nats-token-7f3a9c";

class NatsRelayE2e : public ::testing::Test {
protected:
    void SetUp() override {
        // PostgreSQL does not crash in this test: commits need not wait for the disk, which
        // on a shared CI machine is what bounds a transaction per event.
        db_.exec("ALTER DATABASE " + db_.name() + " SET synchronous_commit = off");
        nats_.start();
        JetStreamClient(nats_).add_stream(kStream, {"outbox.>"});
        plugin_dir_ = dir_.path() / "plugins";
        fs::create_directory(plugin_dir_);
        fs::copy_file(NATS_RELAY_PLUGIN, plugin_dir_ / "libnats_relay.so");
        config_file_ = (dir_.path() / "outboxd.yaml").string();
        std::ofstream(config_file_) << "handlers:\n"
                                       "  nats-relay:\n"
                                       "    timeout: 5s\n"
                                       "    config:\n"
                                       "      servers: [" << nats_.url() << "]\n"
                                       "      token_env: NATS_TOKEN\n"
                                       "      stream: OUTBOX\n"
                                       "      event_types: [OrderPlaced]\n"
                                       "      publish_timeout: 2s\n";
    }

    std::unique_ptr<ChildProcess> start_host(const std::string& host_id) {
        std::map<std::string, std::string> env{{"OUTBOX_DATABASE_URL", db_.url()},
                                               {"OUTBOX_PLUGIN_DIR", plugin_dir_.string()},
                                               {"OUTBOX_HOST_ID", host_id},
                                               {"OUTBOX_LEASE_DURATION", "2s"},
                                               {"OUTBOX_POLL_INTERVAL", "200ms"},
                                               {"OUTBOX_INITIAL_BACKOFF", "100ms"},
                                               {"OUTBOX_MAX_BACKOFF", "1s"},
                                               {"OUTBOX_MAX_ATTEMPTS", "50"},
                                               {"OUTBOX_CONCURRENCY", "32"},
                                               {"OUTBOX_BATCH_SIZE", "200"},
                                               {"OUTBOX_DB_POOL_SIZE", "24"},
                                               {"OUTBOX_ADMIN_LISTEN", "off"},
                                               {"OUTBOX_SHUTDOWN_TIMEOUT", "5s"},
                                               {"NATS_TOKEN", kToken}};
        const std::string log = (dir_.path() / (host_id + ".log")).string();
        logs_.push_back(log);
        return std::make_unique<ChildProcess>(std::vector<std::string>{OUTBOXD_BINARY, "run", "--config", config_file_},
                                              env, log);
    }
    std::string host_logs() const {
        std::string all;
        for (const auto& log : logs_) all += "--- " + log + "\n" + read_file(log);
        return all;
    }
    long long count(const std::string& sql) const { return std::stoll(db_.scalar(sql)); }
    long long completed() const { return count("SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'"); }
    std::string status_summary() const {
        return db_.scalar("SELECT coalesce(string_agg(status || '/' || coalesce(last_error_code, '-') || '=' || n, ', '), "
                          "'none') FROM (SELECT status, last_error_code, count(*) n FROM event_publication GROUP BY 1, 2) s");
    }
    // Waits until `fraction` of the events are completed; false when that takes too long.
    bool progress_to(double fraction) const {
        return wait_until([&] { return completed() >= static_cast<long long>(kEvents * fraction); }, 90s);
    }

    TestDatabase db_;
    TempDir dir_;
    NatsServer nats_{kToken};
    fs::path plugin_dir_;
    std::string config_file_;
    std::vector<std::string> logs_;
};

TEST_F(NatsRelayE2e, EveryEventIsStoredOnceInPublishOrderPerAggregateThroughServerRestartsAndAKilledHost) {
    const auto started = std::chrono::steady_clock::now();
    // Published in order n = 0, 1, 2, ... in transactions of 250: event n belongs to
    // aggregate n % kAggregates, so each aggregate's publish order is ascending n.
    std::map<std::string, int> number_of;  // event id -> n; read once the publisher is joined
    const auto publish_from = [&](pqxx::connection& conn, int from) {
        pqxx::work tx(conn);
        const auto rows = tx.exec_params(
            "SELECT g, outbox_publish('acme', 'OrderPlaced', jsonb_build_object('n', g), "
            "'order-' || (g % $3))::text FROM generate_series($1::int, $2::int) g ORDER BY g",
            from, std::min(from + 249, kEvents - 1), kAggregates);
        for (const auto& row : rows) number_of[row[1].as<std::string>()] = row[0].as<int>();
        tx.commit();
    };
    // The first 250, each the first of its aggregate, are already in the stream, as if a
    // host had published them and died before completing them: their deliveries must be
    // duplicates, not second messages.
    {
        pqxx::connection conn(db_.url());
        publish_from(conn, 0);
        JetStreamClient client(nats_);
        for (const auto& [id, n] : number_of) {
            const nlohmann::json body{{"id", id}, {"aggregate_key", "order-" + std::to_string(n % kAggregates)},
                                      {"aggregate_position", 1}, {"payload", {{"n", n}}}};
            ASSERT_TRUE(client.publish("outbox.acme.OrderPlaced", id, body.dump()));
        }
    }
    auto first = start_host("nats-e2e-a");
    auto second = start_host("nats-e2e-b");
    // The rest while the hosts relay.
    std::string publish_error;
    std::thread publisher([&] {
        try {
            pqxx::connection conn(db_.url());
            for (int from = 250; from < kEvents; from += 250) publish_from(conn, from);
        } catch (const std::exception& error) {
            publish_error = error.what();
        }
    });
    struct Join {
        std::thread& thread;
        ~Join() {
            if (thread.joinable()) thread.join();
        }
    } join_publisher{publisher};

    std::vector<long long> at_disruption;

    ASSERT_TRUE(progress_to(0.15)) << status_summary() << host_logs();
    at_disruption.push_back(completed());
    nats_.stop();
    std::this_thread::sleep_for(1s);  // hosts see the outage: calls fail and retry meanwhile
    nats_.start();

    ASSERT_TRUE(progress_to(0.40)) << status_summary() << host_logs();
    first->signal(SIGKILL);
    ASSERT_TRUE(first->wait(10s));
    at_disruption.push_back(completed());

    ASSERT_TRUE(progress_to(0.65)) << status_summary() << host_logs();
    at_disruption.push_back(completed());
    nats_.stop();
    std::this_thread::sleep_for(1s);
    nats_.start();

    const bool done = wait_until(
        [&] {
            return completed() == kEvents &&
                   count("SELECT count(*) FROM event_publication WHERE status <> 'COMPLETED'") == 0;
        },
        90s);
    ASSERT_TRUE(done) << status_summary() << host_logs();
    const auto relayed = std::chrono::steady_clock::now();
    publisher.join();
    ASSERT_EQ(publish_error, "");
    ASSERT_EQ(number_of.size(), static_cast<std::size_t>(kEvents));
    second->signal(SIGTERM);
    EXPECT_EQ(second->wait(15s), std::optional<int>(0)) << host_logs();
    for (const long long seen : at_disruption) {
        EXPECT_LT(seen, kEvents) << "every disruption happened while events were still being relayed";
    }

    JetStreamClient client(nats_);
    EXPECT_EQ(client.count(kStream), static_cast<std::uint64_t>(kEvents)) << "exactly one message per event";
    const auto stored = client.read_all(kStream, "outbox.>", kEvents, 60s);
    ASSERT_EQ(stored.size(), static_cast<std::size_t>(kEvents));

    std::set<std::string> ids;
    std::map<int, std::vector<int>> order;  // aggregate -> n in stream order
    for (const auto& message : stored) {
        ASSERT_TRUE(number_of.contains(message.msg_id)) << "a message for an event that was never published";
        EXPECT_TRUE(ids.insert(message.msg_id).second) << "stored twice: " << message.msg_id;
        const auto body = nlohmann::json::parse(message.body);
        const int n = body["payload"]["n"].get<int>();
        EXPECT_EQ(n, number_of.at(message.msg_id));
        EXPECT_EQ(body["aggregate_key"], "order-" + std::to_string(n % kAggregates));
        EXPECT_EQ(body["aggregate_position"].get<int>(), n / kAggregates + 1);
        order[n % kAggregates].push_back(n);
    }
    EXPECT_EQ(ids.size(), static_cast<std::size_t>(kEvents));
    ASSERT_EQ(order.size(), static_cast<std::size_t>(kAggregates));
    for (const auto& [aggregate, numbers] : order) {
        std::vector<int> in_publish_order;
        for (int n = aggregate; n < kEvents; n += kAggregates) in_publish_order.push_back(n);
        ASSERT_EQ(numbers, in_publish_order) << "aggregate order-" << aggregate << " is stored out of publish order";
    }
    EXPECT_EQ(host_logs().find(kToken), std::string::npos) << "the token is never logged";
    const auto ms = [](auto duration) { return std::chrono::duration_cast<std::chrono::milliseconds>(duration).count(); };
    std::cout << "nats-relay e2e: " << kEvents << " events published and relayed in " << ms(relayed - started)
              << " ms, checked in "
              << ms(std::chrono::steady_clock::now() - relayed) << " ms; completed at the disruptions: " << at_disruption[0] << ", " << at_disruption[1] << ", "
              << at_disruption[2] << "; attempts: "
              << db_.scalar("SELECT sum(attempt_count) FROM event_publication") << '\n';
}

}  // namespace
}  // namespace outbox::test
