#include <iomanip>
#include <iostream>

#include <pqxx/pqxx>

#include "app/commands.hpp"
#include "db/connection_pool.hpp"
#include "db/db_error.hpp"
#include "fleet/fleet_registry.hpp"
#include "operations/backlog_query.hpp"
#include "routing/paused_handlers.hpp"

namespace outbox::app {
namespace {

void print_fleet(const fleet::FleetView& view) {
    std::cout << "\nFLEET\n";
    std::cout << "releases: " << fleet::release_summary(view) << "\n";
    std::cout << std::setw(28) << "HOST" << std::setw(9) << "STATE" << std::setw(22) << "LAST HEARTBEAT"
              << std::setw(22) << "RELEASE (SCHEMA)" << "HANDLERS (FILE, ABI, SHA-256)\n";
    if (view.hosts.empty()) std::cout << "no host has registered yet\n";
    for (const auto& host : view.hosts) {
        std::string handlers;
        for (const auto& h : host.handlers) {
            handlers += (handlers.empty() ? "" : "; ") + h.handler + " (" + h.file + ", " + h.abi +
                        (h.sha256.empty() ? "" : ", " + h.sha256.substr(0, 12)) + ")";
        }
        if (!host.enabled) handlers = "[processing disabled] " + handlers;
        if (host.abandoned_threads > 0) {
            handlers = "[" + std::to_string(host.abandoned_threads) + " abandoned handler thread(s)] " + handlers;
        }
        std::cout << std::setw(28) << host.host_id << std::setw(9)
                  << (host.live ? "live" : host.stopped ? "stopped" : "gone") << std::setw(22) << host.last_heartbeat_at
                  << std::setw(22)
                  << host.version + " (" + (host.schema_needed > 0 ? std::to_string(host.schema_needed) : "?") + ")"
                  << (handlers.empty() ? "-" : handlers) << "\n";
    }
    std::cout << "\nHANDLER MISMATCHES BETWEEN LIVE HOSTS\n";
    if (view.mismatches.empty()) std::cout << "none\n";
    for (const auto& mismatch : view.mismatches) {
        std::cout << mismatch.event_type << ":\n";
        for (const auto& [names, hosts] : mismatch.handler_sets) {
            std::string handler_list, host_list;
            for (const auto& n : names) handler_list += (handler_list.empty() ? "" : ",") + n;
            for (const auto& h : hosts) host_list += (host_list.empty() ? "" : ",") + h;
            std::cout << "  handlers {" << handler_list << "} on " << host_list << "\n";
        }
    }
    std::cout << "\nPLUGIN BUILDS THAT DIFFER BETWEEN LIVE HOSTS\n";
    if (view.build_mismatches.empty()) std::cout << "none\n";
    for (const auto& mismatch : view.build_mismatches) {
        std::cout << mismatch.handler << ":\n";
        for (const auto& [sha256, hosts] : mismatch.builds) {
            std::string host_list;
            for (const auto& h : hosts) host_list += (host_list.empty() ? "" : ",") + h;
            std::cout << "  sha256 " << sha256.substr(0, 12) << " on " << host_list << "\n";
        }
    }
}

}  // namespace

int status_command(const config::Config& config) {
    try {
        auto conn = db::open_connection(config.database.url);
        const operations::StatusReport report = operations::read_status_report(*conn);
        std::cout << "EVENTS BY STATUS AND TYPE\n";
        std::cout << std::left << std::setw(18) << "STATUS" << std::setw(32) << "EVENT TYPE" << "COUNT\n";
        for (const auto& row : report.counts) {
            std::cout << std::setw(18) << row.status << std::setw(32) << row.event_type << row.count << "\n";
        }
        std::cout << "\noldest undelivered event: " << report.oldest_seconds << "s old\n";
        std::cout << "blocked behind an earlier event of their aggregate: " << report.blocked << " event(s)\n";
        std::cout << "\nUNHANDLED EVENT TYPES (pending for over a minute, never claimed)\n";
        if (report.unhandled.empty()) std::cout << "none\n";
        for (const auto& row : report.unhandled) {
            std::cout << std::setw(32) << row.event_type << row.count << " event(s), oldest " << row.oldest_seconds
                      << "s\n";
        }
        std::cout << "\nREVIEW_REQUIRED BY TYPE AND CODE\n";
        if (report.review.empty()) std::cout << "none\n";
        for (const auto& row : report.review) {
            std::cout << std::setw(32) << row.event_type << std::setw(24) << row.code << row.count << "\n";
        }
        const auto paused = routing::read_paused_handlers(*conn);
        std::cout << "\nPAUSED HANDLERS (fleet-wide; their events wait)\n";
        if (paused.empty()) std::cout << "none\n";
        for (const auto& p : paused) {
            std::cout << std::setw(32) << p.handler << "paused since " << p.paused_at << " by " << p.paused_by << "\n";
        }
        print_fleet(fleet::read_fleet(*conn));
        return 0;
    } catch (const std::exception&) {
        std::cerr << "outboxd status: " << db::classify_db_error(std::current_exception()).describe()
                  << "; check database.url / OUTBOX_DATABASE_URL and run `outboxd migrate`\n";
        return 1;
    }
}

}  // namespace outbox::app
