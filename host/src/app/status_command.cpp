#include <iomanip>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include <pqxx/pqxx>

#include "app/commands.hpp"
#include "db/connection_pool.hpp"
#include "db/db_error.hpp"
#include "fleet/fleet_registry.hpp"
#include "log/log.hpp"
#include "operations/backlog_query.hpp"
#include "routing/paused_handlers.hpp"

namespace outbox::app {
namespace {

constexpr const char* kRequireRegisteredSql =
    "SELECT coalesce((SELECT value = 'true'::jsonb FROM outbox_setting WHERE name = 'require_registered_types'), false)";

// Every string read from the database goes to the terminal through this: a host id, a
// handler file or an actor with an escape sequence or a newline must not rewrite the screen.
std::string safe(std::string_view text) { return log::escape_control(text); }

void print_fleet(const fleet::FleetView& view) {
    std::cout << "\nFLEET\n";
    std::cout << "releases: " << fleet::release_summary(view) << "\n";
    std::cout << std::setw(28) << "HOST" << std::setw(9) << "STATE" << std::setw(22) << "LAST HEARTBEAT"
              << std::setw(22) << "RELEASE (SCHEMA)" << "HANDLERS (FILE, ABI, SHA-256)\n";
    if (view.hosts.empty()) std::cout << "no host has registered yet\n";
    for (const auto& host : view.hosts) {
        std::string handlers;
        for (const auto& h : host.handlers) {
            handlers += (handlers.empty() ? "" : "; ") + safe(h.handler) + " (" + safe(h.file) + ", " + safe(h.abi) +
                        (h.sha256.empty() ? "" : ", " + safe(h.sha256.substr(0, 12))) + ")";
        }
        if (!host.enabled) handlers = "[processing disabled] " + handlers;
        if (host.abandoned_threads > 0) {
            handlers = "[" + std::to_string(host.abandoned_threads) + " abandoned handler thread(s)] " + handlers;
        }
        std::cout << std::setw(28) << safe(host.host_id) << std::setw(9)
                  << (host.live ? "live" : host.stopped ? "stopped" : "gone") << std::setw(22) << safe(host.last_heartbeat_at)
                  << std::setw(22)
                  << safe(host.version) + " (" + (host.schema_needed > 0 ? std::to_string(host.schema_needed) : "?") + ")"
                  << (handlers.empty() ? "-" : handlers) << "\n";
    }
    std::cout << "\nHANDLER MISMATCHES BETWEEN LIVE HOSTS\n";
    if (view.mismatches.empty()) std::cout << "none\n";
    for (const auto& mismatch : view.mismatches) {
        std::cout << safe(mismatch.event_type) << ":\n";
        for (const auto& [names, hosts] : mismatch.handler_sets) {
            std::string handler_list, host_list;
            for (const auto& n : names) handler_list += (handler_list.empty() ? "" : ",") + safe(n);
            for (const auto& h : hosts) host_list += (host_list.empty() ? "" : ",") + safe(h);
            std::cout << "  handlers {" << handler_list << "} on " << host_list << "\n";
        }
    }
    std::cout << "\nPLUGIN BUILDS THAT DIFFER BETWEEN LIVE HOSTS\n";
    if (view.build_mismatches.empty()) std::cout << "none\n";
    for (const auto& mismatch : view.build_mismatches) {
        std::cout << safe(mismatch.handler) << ":\n";
        for (const auto& [sha256, hosts] : mismatch.builds) {
            std::string host_list;
            for (const auto& h : hosts) host_list += (host_list.empty() ? "" : ",") + safe(h);
            std::cout << "  sha256 " << safe(sha256.substr(0, 12)) << " on " << host_list << "\n";
        }
    }
}

// The event types the live hosts' loaded handlers support (a stopped or silent host's do
// not count: nothing claims for it).
// Paused handlers, then one line per open circuit breaker (a pause by "circuit-breaker").
void print_paused(const std::vector<routing::PausedHandler>& paused) {
    std::cout << "\nPAUSED HANDLERS (fleet-wide; their events wait)\n";
    if (paused.empty()) std::cout << "none\n";
    for (const auto& p : paused) {
        std::cout << std::setw(32) << safe(p.handler) << "paused since " << safe(p.paused_at) << " by " << safe(p.paused_by)
                  << "\n";
    }
    std::cout << "\nOPEN CIRCUIT BREAKERS (`outboxd handlers resume NAME` closes one now, `pause` makes it a manual pause)\n";
    bool any = false;
    for (const auto& p : paused) {
        if (!p.circuit_open()) continue;
        any = true;
        std::cout << std::setw(32) << safe(p.handler) << "circuit open since " << safe(p.paused_at);
        if (!p.probe_host.empty()) {
            std::cout << ", probe running on " << safe(p.probe_host) << "\n";
        } else {
            std::cout << ", next probe at " << (p.next_probe_at.empty() ? std::string("once due") : safe(p.next_probe_at))
                      << "\n";
        }
    }
    if (!any) std::cout << "none\n";
}

std::vector<std::string> live_handled_types(const fleet::FleetView& view) {
    std::set<std::string> types;
    for (const auto& host : view.hosts) {
        if (!host.live) continue;
        for (const auto& handler : host.handlers) types.insert(handler.event_types.begin(), handler.event_types.end());
    }
    return {types.begin(), types.end()};
}

}  // namespace

int status_command(const config::Config& config) {
    try {
        auto conn = db::open_connection(config.database.url);
        const fleet::FleetView fleet = fleet::read_fleet(*conn);
        const operations::StatusReport report = operations::read_status_report(*conn, live_handled_types(fleet));
        std::cout << "EVENTS BY STATUS AND TYPE\n";
        std::cout << std::left << std::setw(18) << "STATUS" << std::setw(32) << "EVENT TYPE" << "COUNT\n";
        for (const auto& row : report.counts) {
            std::cout << std::setw(18) << safe(row.status) << std::setw(32) << safe(row.event_type) << row.count << "\n";
        }
        std::cout << "\noldest undelivered event: " << report.oldest_seconds << "s old\n";
        std::cout << "blocked behind an earlier event of their aggregate: " << report.blocked << " event(s)\n";
        std::cout << "\nUNHANDLED EVENT TYPES (pending for over a minute, never claimed)\n";
        if (report.unhandled.empty()) std::cout << "none\n";
        for (const auto& row : report.unhandled) {
            std::cout << std::setw(32) << safe(row.event_type) << row.count << " event(s), oldest " << row.oldest_seconds
                      << "s\n";
        }
        std::cout << "\nHEADS BLOCKING THEIR AGGREGATE THAT NO LIVE HOST HANDLES (discard one to release its successors)\n";
        if (report.blocking_heads.empty()) std::cout << "none\n";
        for (const auto& head : report.blocking_heads) {
            std::cout << std::setw(38) << head.event_id << std::setw(20) << safe(head.company_id) << std::setw(32)
                      << safe(head.event_type) << std::setw(12) << head.status << head.successors
                      << " successor(s) waiting\n";
        }
        std::cout << "\nREVIEW_REQUIRED BY TYPE AND CODE\n";
        if (report.review.empty()) std::cout << "none\n";
        for (const auto& row : report.review) {
            std::cout << std::setw(32) << safe(row.event_type) << std::setw(24) << safe(row.code) << row.count << "\n";
        }
        {
            pqxx::read_transaction tx(*conn);
            std::cout << "\nrequire_registered_types: " << (tx.exec(kRequireRegisteredSql)[0][0].as<bool>() ? "true" : "false")
                      << " (outbox_publish() refuses unregistered event types when true; change it with "
                         "`outboxd migrate --require-registered-types=true|false`)\n";
        }
        print_paused(routing::read_paused_handlers(*conn));
        print_fleet(fleet);
        return 0;
    } catch (const std::exception&) {
        std::cerr << "outboxd status: " << db::classify_db_error(std::current_exception()).describe()
                  << "; check database.url / OUTBOX_DATABASE_URL and run `outboxd migrate`\n";
        return 1;
    }
}

}  // namespace outbox::app
