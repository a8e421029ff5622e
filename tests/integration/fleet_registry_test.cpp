// The fleet registry: which host runs which handlers, who is gone, and event types whose
// handler sets differ between live hosts.
#include <gtest/gtest.h>

#include <thread>

#include <pqxx/pqxx>

#include "fleet/fleet_registry.hpp"
#include "support/pg_fixture.hpp"
#include "support/test_host.hpp"

namespace outbox::test {
namespace {

using namespace std::chrono_literals;
using fleet::read_fleet;

std::shared_ptr<const dispatch::HandlerSet> handlers_of(
    const std::vector<std::pair<std::string, std::vector<std::string>>>& handlers) {
    std::vector<dispatch::HandlerEntry> entries;
    for (const auto& [name, types] : handlers) {
        entries.push_back({name, types, nullptr, {}, "lib" + name + ".so", "1.0 (sdk 1.0.0, libstdc++/cxx11)"});
    }
    return std::make_shared<const dispatch::HandlerSet>(std::move(entries));
}

fleet::FleetRegistry::Options options_for(const TestDatabase& db, const std::string& host) {
    return {db.url(), host, "test", true, 200ms, std::chrono::hours{24}, {}};
}

const fleet::HostRecord* find_host(const fleet::FleetView& view, const std::string& id) {
    for (const auto& host : view.hosts) {
        if (host.host_id == id) return &host;
    }
    return nullptr;
}

TEST(FleetRegistry, HostsRecordTheirHandlersAndDisagreementsAreReported) {
    TestDatabase db;
    db::OutageLog outage;
    dispatch::CurrentHandlers a_handlers(handlers_of({{"mailer", {"OrderPlaced"}}, {"audit", {"OrderPlaced"}}}));
    dispatch::CurrentHandlers b_handlers(handlers_of({{"mailer", {"OrderPlaced"}}}));
    fleet::FleetRegistry a(options_for(db, "host-a"), outage, a_handlers);
    fleet::FleetRegistry b(options_for(db, "host-b"), outage, b_handlers);
    std::jthread a_thread([&](std::stop_token stop) { a.run(stop); });
    std::jthread b_thread([&](std::stop_token stop) { b.run(stop); });
    pqxx::connection conn(db.url());
    ASSERT_TRUE(wait_until([&] { return read_fleet(conn).hosts.size() == 2; }, 5s));

    auto view = read_fleet(conn);
    const auto* host_a = find_host(view, "host-a");
    ASSERT_NE(host_a, nullptr);
    EXPECT_TRUE(host_a->live);
    ASSERT_EQ(host_a->handlers.size(), 2u);
    EXPECT_EQ(host_a->handlers[0].file, "libmailer.so");
    EXPECT_EQ(host_a->handlers[0].abi, "1.0 (sdk 1.0.0, libstdc++/cxx11)");
    ASSERT_EQ(view.mismatches.size(), 1u);
    EXPECT_EQ(view.mismatches[0].event_type, "OrderPlaced");
    EXPECT_EQ(view.mismatches[0].handler_sets.size(), 2u);

    // host-b gets the audit plugin too: the fleet agrees again once it re-registers.
    b_handlers.set(handlers_of({{"mailer", {"OrderPlaced"}}, {"audit", {"OrderPlaced"}}}));
    b.refresh();
    EXPECT_TRUE(wait_until([&] { return read_fleet(conn).mismatches.empty(); }, 5s));
}

TEST(FleetRegistry, CleanStopIsShownAtOnceAndAKilledHostAsGone) {
    TestDatabase db;
    db::OutageLog outage;
    dispatch::CurrentHandlers handlers(handlers_of({{"mailer", {"OrderPlaced"}}}));
    fleet::FleetRegistry clean(options_for(db, "clean"), outage, handlers);
    fleet::FleetRegistry killed(options_for(db, "killed"), outage, handlers);
    {
        std::jthread clean_thread([&](std::stop_token stop) { clean.run(stop); });
        std::jthread killed_thread([&](std::stop_token stop) { killed.run(stop); });
        pqxx::connection conn(db.url());
        ASSERT_TRUE(wait_until([&] { return read_fleet(conn).hosts.size() == 2; }, 5s));
    }
    // The "killed" host's last write said stopped too (its thread ended cleanly); undo that
    // to model a kill -9, which writes nothing.
    db.exec("UPDATE outbox_host SET stopped_at = NULL WHERE host_id = 'killed'");
    pqxx::connection conn(db.url());
    auto view = read_fleet(conn);
    EXPECT_TRUE(find_host(view, "clean")->stopped);
    EXPECT_FALSE(find_host(view, "clean")->live);
    EXPECT_TRUE(wait_until([&] { return !find_host(read_fleet(conn), "killed")->live; }, 5s))
        << "silent for three heartbeat intervals means gone";
    EXPECT_FALSE(find_host(read_fleet(conn), "killed")->stopped);
}

TEST(FleetRegistry, HostsGoneLongerThanTheRetentionAreForgotten) {
    TestDatabase db;
    db.exec("INSERT INTO outbox_host (host_id, version, started_at, last_heartbeat_at, heartbeat_interval_ms, enabled) "
            "VALUES ('ancient', 'old', now() - interval '3 days', now() - interval '2 days', 5000, true), "
            "('recent', 'old', now() - interval '3 hours', now() - interval '2 hours', 5000, true)");
    db::OutageLog outage;
    dispatch::CurrentHandlers handlers(handlers_of({}));
    fleet::FleetRegistry registry(options_for(db, "me"), outage, handlers);
    {
        std::jthread thread([&](std::stop_token stop) { registry.run(stop); });
        pqxx::connection conn(db.url());
        ASSERT_TRUE(wait_until([&] { return find_host(read_fleet(conn), "me") != nullptr; }, 5s));
    }
    EXPECT_EQ(db.scalar("SELECT string_agg(host_id, ',' ORDER BY host_id) FROM outbox_host"), "me,recent");
}

}  // namespace
}  // namespace outbox::test
