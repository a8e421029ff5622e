// The fleet registry: which host runs which handlers, who is gone, and event types whose
// handler sets differ between live hosts.
#include <gtest/gtest.h>

#include <map>
#include <thread>

#include <pqxx/pqxx>

#include "fleet/fleet_registry.hpp"
#include "support/pg_fixture.hpp"
#include "support/test_host.hpp"

namespace outbox::test {
namespace {

using namespace std::chrono_literals;
using fleet::read_fleet;

std::shared_ptr<const routing::HandlerSet> handlers_of(
    const std::vector<std::pair<std::string, std::vector<std::string>>>& handlers, const std::string& sha256 = {}) {
    std::vector<routing::HandlerEntry> entries;
    for (const auto& [name, types] : handlers) {
        entries.push_back({name, types, nullptr, {}, "lib" + name + ".so", "1.0 (sdk 1.0.0, libstdc++/cxx11)", sha256});
    }
    return std::make_shared<const routing::HandlerSet>(std::move(entries));
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
    routing::CurrentHandlers a_handlers(handlers_of({{"mailer", {"OrderPlaced"}}, {"audit", {"OrderPlaced"}}}));
    routing::CurrentHandlers b_handlers(handlers_of({{"mailer", {"OrderPlaced"}}}));
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

TEST(FleetRegistry, HostsRunningDifferentBuildsOfAHandlerAreReported) {
    TestDatabase db;
    db::OutageLog outage;
    const std::string old_build(64, 'a');
    const std::string new_build(64, 'b');
    routing::CurrentHandlers a_handlers(handlers_of({{"mailer", {"OrderPlaced"}}}, old_build));
    routing::CurrentHandlers b_handlers(handlers_of({{"mailer", {"OrderPlaced"}}}, new_build));
    fleet::FleetRegistry a(options_for(db, "host-a"), outage, a_handlers);
    fleet::FleetRegistry b(options_for(db, "host-b"), outage, b_handlers);
    std::jthread a_thread([&](std::stop_token stop) { a.run(stop); });
    std::jthread b_thread([&](std::stop_token stop) { b.run(stop); });
    // A host of a release that reports no digest runs the same handler: not counted either way.
    db.exec(R"SQL(INSERT INTO outbox_host (host_id, version, started_at, last_heartbeat_at, heartbeat_interval_ms, enabled,
                                           handlers)
                  VALUES ('host-old', '0.1.0', now(), now(), 60000, true,
                          '[{"handler": "mailer", "event_types": ["OrderPlaced"], "file": "libmailer.so", "abi": "1.0"}]'))SQL");
    pqxx::connection conn(db.url());
    ASSERT_TRUE(wait_until([&] { return read_fleet(conn).hosts.size() == 3; }, 5s));

    auto view = read_fleet(conn);
    EXPECT_TRUE(view.mismatches.empty()) << "the handler sets agree";
    EXPECT_EQ(find_host(view, "host-a")->handlers.at(0).sha256, old_build);
    ASSERT_EQ(view.build_mismatches.size(), 1u);
    EXPECT_EQ(view.build_mismatches[0].handler, "mailer");
    const std::map<std::string, std::vector<std::string>> expected{{old_build, {"host-a"}}, {new_build, {"host-b"}}};
    EXPECT_EQ(view.build_mismatches[0].builds, expected);
    const auto json = fleet::to_json(view);
    EXPECT_EQ(json["plugin_mismatches"][0]["handler"], "mailer");
    EXPECT_EQ(json["plugin_mismatches"][0]["builds"][1]["sha256"], new_build);
    EXPECT_EQ(json["hosts"][0]["handlers"][0]["sha256"], old_build);

    // The roll-out finishes: host-a runs the new build too.
    a_handlers.set(handlers_of({{"mailer", {"OrderPlaced"}}}, new_build));
    a.refresh();
    EXPECT_TRUE(wait_until([&] { return read_fleet(conn).build_mismatches.empty(); }, 5s));
}

TEST(FleetRegistry, CleanStopIsShownAtOnceAndAKilledHostAsGone) {
    TestDatabase db;
    db::OutageLog outage;
    routing::CurrentHandlers handlers(handlers_of({{"mailer", {"OrderPlaced"}}}));
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
    routing::CurrentHandlers handlers(handlers_of({}));
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
