// Fleet-wide handler limits: several hosts on one database together stay under a handler's
// rate_limit_per_second and max_concurrency.
#include <gtest/gtest.h>

#include <algorithm>

#include <pqxx/pqxx>

#include "dispatch/fleet_limiter.hpp"
#include "support/pg_fixture.hpp"
#include "support/test_host.hpp"

namespace outbox::test {
namespace {

using namespace std::chrono_literals;

std::vector<double> effect_times(const TestDatabase& db) {
    std::vector<double> times;
    for (const auto& row : db.exec("SELECT extract(epoch FROM at)::float8 FROM scripted_effect ORDER BY at")) {
        times.push_back(row[0].as<double>());
    }
    return times;
}

std::vector<std::unique_ptr<TestHost>> three_hosts(const TestDatabase& db, const config::HandlerSettings& settings) {
    std::vector<std::unique_ptr<TestHost>> hosts;
    for (int i = 0; i < 3; ++i) {
        hosts.push_back(std::make_unique<TestHost>(fast_options(db.url(), "host-" + std::to_string(i)),
                                                   std::vector<std::string>{OUTBOX_FIXTURE_SCRIPTED},
                                                   plugin::HandlerConfigs{}, 30s,
                                                   std::map<std::string, config::HandlerSettings>{{"scripted", settings}}));
    }
    return hosts;
}

TEST(FleetLimiter, StartIntervalLeavesAMarginBelowTheRate) {
    using dispatch::FleetLimiter;
    EXPECT_GT(FleetLimiter::start_interval(2), 500ms);
    EXPECT_LE(FleetLimiter::start_interval(2), 550ms);
    EXPECT_GT(FleetLimiter::start_interval(1000), 1ms);
    EXPECT_LE(FleetLimiter::start_interval(1000), 1500us);
}

TEST(FleetLimiter, ThreeHostsTogetherNeverExceedTheRateInAnyOneSecondWindow) {
    TestDatabase db;
    create_scripted_effect_table(db.url());
    constexpr int kRate = 10;
    constexpr int kEvents = 45;
    publish_many(db.url(), "TestRequested", R"({"db": true})", kEvents);
    config::HandlerSettings settings;
    settings.rate_limit_per_second = kRate;
    auto hosts = three_hosts(db, settings);
    for (auto& host : hosts) host->start();
    ASSERT_TRUE(wait_until([&] { return db.scalar("SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'") ==
                                        std::to_string(kEvents); },
                           30s));
    for (auto& host : hosts) host->stop();
    const auto times = effect_times(db);
    ASSERT_EQ(times.size(), static_cast<std::size_t>(kEvents));
    std::size_t worst = 0;
    for (std::size_t i = 0; i < times.size(); ++i) {
        const auto end = std::lower_bound(times.begin() + static_cast<std::ptrdiff_t>(i), times.end(), times[i] + 1.0);
        worst = std::max(worst, static_cast<std::size_t>(end - (times.begin() + static_cast<std::ptrdiff_t>(i))));
    }
    EXPECT_LE(worst, static_cast<std::size_t>(kRate)) << "calls started in one 1-second window across the fleet";
    EXPECT_GE(worst, static_cast<std::size_t>(kRate) - 3) << "the limit spreads calls, it does not starve them";
    int hosts_that_called = 0;
    for (auto& host : hosts) hosts_that_called += host->metrics().handler_calls().empty() ? 0 : 1;
    EXPECT_GE(hosts_that_called, 2);
}

TEST(FleetLimiter, ThreeHostsTogetherNeverExceedMaxConcurrency) {
    TestDatabase db;
    create_scripted_effect_table(db.url());
    constexpr int kEvents = 24;
    constexpr double kSleep = 0.15;
    publish_many(db.url(), "TestRequested", R"({"db": true, "sleep_ms": 150})", kEvents);
    config::HandlerSettings settings;
    settings.max_concurrency = 2;
    auto hosts = three_hosts(db, settings);
    for (auto& host : hosts) host->start();
    ASSERT_TRUE(wait_until([&] { return db.scalar("SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'") ==
                                        std::to_string(kEvents); },
                           30s));
    for (auto& host : hosts) host->stop();
    // Each call ends at its recorded time and began at least kSleep earlier.
    const auto ends = effect_times(db);
    int worst = 0;
    for (const double t : ends) {
        const int overlapping = static_cast<int>(std::count_if(ends.begin(), ends.end(), [&](double other) {
            return other > t - 0.005 && other - kSleep < t - 0.005;
        }));
        worst = std::max(worst, overlapping);
    }
    EXPECT_LE(worst, 2) << "calls in flight at once across the fleet";
    EXPECT_EQ(worst, 2) << "both slots are used";
}

TEST(FleetLimiter, ConcurrencySlotsOfADeadHostAreFreedWithItsConnection) {
    TestDatabase db;
    pqxx::connection holder(db.url());
    {
        pqxx::nontransaction tx(holder);
        // A "host" holding both slots of handler x.
        EXPECT_GE(tx.exec("SELECT outbox_try_acquire_call_slot(hashtext('outboxd:x'), 2, '{}')")[0][0].as<int>(), 0);
        const int second = tx.exec("SELECT outbox_try_acquire_call_slot(hashtext('outboxd:x'), 2, "
                                   "ARRAY(SELECT objid::int FROM pg_locks WHERE locktype = 'advisory' "
                                   "AND pid = pg_backend_pid()))")[0][0]
                               .as<int>();
        EXPECT_GE(second, 0);
    }
    pqxx::connection other(db.url());
    pqxx::nontransaction probe(other);
    EXPECT_EQ(probe.exec("SELECT outbox_try_acquire_call_slot(hashtext('outboxd:x'), 2, '{}')")[0][0].as<int>(), -1);
    holder.disconnect();
    EXPECT_TRUE(wait_until(
        [&] { return probe.exec("SELECT outbox_try_acquire_call_slot(hashtext('outboxd:x'), 2, '{}')")[0][0].as<int>() >= 0; },
        5s));
}

}  // namespace
}  // namespace outbox::test
