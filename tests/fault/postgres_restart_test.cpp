// PostgreSQL restarted under running hosts (fast: clients are disconnected and the server
// shuts down cleanly; immediate: the server dies and recovers from its WAL). The hosts keep
// running, say once that the database is gone and once that it is back, and finish the work.
#include <gtest/gtest.h>

#include <thread>

#include "fault/fault_fixture.hpp"
#include "support/test_host.hpp"

namespace outbox::test::fault {
namespace {

using namespace std::chrono_literals;

TEST(PostgresRestart, HostsRideOutFastAndImmediateRestartsLoggingEachOutageOnce) {
    constexpr int kEvents = 6000;
    const OwnCluster cluster;  // restarting it cannot disturb other tests
    const std::string& url = cluster.url();
    publish_generated(url, kEvents, "jsonb_build_object('db', true, 'sleep_ms', 20 + abs(hashtext(g::text)) % 30)");

    const Fleet fleet(url, {{"OUTBOX_LEASE_DURATION", "3s"},
                            {"OUTBOX_CONCURRENCY", "8"},
                            {"OUTBOX_BATCH_SIZE", "50"},
                            {"OUTBOX_POLL_INTERVAL", "200ms"},
                            {"OUTBOX_INITIAL_BACKOFF", "100ms"},
                            {"OUTBOX_MAX_BACKOFF", "1s"},
                            {"OUTBOX_MAX_ATTEMPTS", "20"}});
    const std::vector<std::string> names{"host-a", "host-b"};
    std::vector<std::unique_ptr<ChildProcess>> hosts;
    for (const auto& name : names) hosts.push_back(fleet.start(name));
    const auto completed = [&] { return count(url, "SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'"); };

    const std::vector<std::string> modes{"fast", "immediate"};
    for (std::size_t outage = 0; outage < modes.size(); ++outage) {
        SCOPED_TRACE("pg_ctl restart -m " + modes[outage]);
        const long long threshold = kEvents * static_cast<long long>(outage + 1) / 4;
        ASSERT_TRUE(wait_until([&] { return completed() >= threshold; }, 60s)) << status_summary(url);
        ASSERT_GT(unsettled(url), 0) << "the restart must land mid-run";
        cluster.restart(modes[outage]);
        for (std::size_t i = 0; i < hosts.size(); ++i) {
            EXPECT_TRUE(wait_until(
                [&] { return count_lines(fleet.log(names[i]), "database reachable again") >= int(outage) + 1; }, 60s))
                << fleet.log(names[i]);
            ASSERT_FALSE(hosts[i]->wait(0ms)) << names[i] << " exited:\n" << fleet.log(names[i]);
        }
    }

    ASSERT_TRUE(wait_until([&] { return unsettled(url) == 0; }, 120s)) << status_summary(url);
    for (std::size_t i = 0; i < hosts.size(); ++i) {
        const std::string log = fleet.log(names[i]);
        EXPECT_EQ(count_lines(log, "database unavailable"), 2) << "one line per outage\n" << log;
        EXPECT_EQ(count_lines(log, "database reachable again"), 2) << "one line per recovery\n" << log;
        stop_cleanly(fleet, *hosts[i], names[i]);
    }
    // DB_UNAVAILABLE and WORKER_LOST attempts are retryable and 20 attempts are plenty.
    expect_final_invariants(url, {}, kEvents);
}

}  // namespace
}  // namespace outbox::test::fault
