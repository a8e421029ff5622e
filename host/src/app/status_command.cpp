#include <iomanip>
#include <iostream>

#include <pqxx/pqxx>

#include "app/commands.hpp"
#include "db/connection_pool.hpp"
#include "db/db_error.hpp"
#include "dispatch/handler_pause.hpp"
#include "fleet/fleet_registry.hpp"
#include "log/log.hpp"

namespace outbox::app {
namespace {

constexpr const char* kCountsSql = R"SQL(
SELECT status, event_type, count(*) FROM event_publication GROUP BY status, event_type ORDER BY status, event_type
)SQL";

constexpr const char* kOldestSql = R"SQL(
SELECT coalesce(extract(epoch FROM now() - min(occurred_at)), 0)::bigint
FROM event_publication WHERE status IN ('PENDING', 'RETRY_WAIT', 'PROCESSING')
)SQL";

// Waiting events held back by an earlier unfinished or reviewed event of their aggregate.
#define OUTBOX_EARLIER_UNFINISHED(w)                                                                     \
    "EXISTS (SELECT 1 FROM event_publication earlier WHERE earlier.company_id = " w ".company_id "     \
    "AND earlier.aggregate_key = " w ".aggregate_key AND earlier.aggregate_seq < " w ".aggregate_seq " \
    "AND earlier.aggregate_seq IS NOT NULL "                                                           \
    "AND earlier.status IN ('PENDING', 'PROCESSING', 'RETRY_WAIT', 'REVIEW_REQUIRED'))"

constexpr const char* kBlockedSql =
    "SELECT count(*) FROM event_publication w WHERE w.aggregate_seq IS NOT NULL "
    "AND w.status IN ('PENDING', 'RETRY_WAIT') AND " OUTBOX_EARLIER_UNFINISHED("w");

// A type is reported unhandled when it has due events nobody has ever attempted for over a
// minute while nothing of that type is in flight: no host in the fleet claims it. Events
// blocked behind an earlier one of their aggregate are not counted: they are waiting, not lost.
constexpr const char* kUnhandledSql =
    "SELECT event_type, count(*), extract(epoch FROM now() - min(occurred_at))::bigint "
    "FROM event_publication p "
    "WHERE status = 'PENDING' AND attempt_count = 0 AND next_attempt_at < now() - interval '1 minute' "
    "AND NOT EXISTS (SELECT 1 FROM event_publication q WHERE q.status = 'PROCESSING' AND q.event_type = p.event_type) "
    "AND NOT (p.aggregate_seq IS NOT NULL AND " OUTBOX_EARLIER_UNFINISHED("p") ") "
    "GROUP BY event_type ORDER BY event_type";
#undef OUTBOX_EARLIER_UNFINISHED

constexpr const char* kRequireRegisteredSql =
    "SELECT coalesce((SELECT value = 'true'::jsonb FROM outbox_setting WHERE name = 'require_registered_types'), false)";

constexpr const char* kReviewSql = R"SQL(
SELECT event_type, coalesce(last_error_code, '-'), count(*) FROM event_publication
WHERE status = 'REVIEW_REQUIRED' GROUP BY 1, 2 ORDER BY 3 DESC, 1, 2
)SQL";

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

}  // namespace

int status_command(const config::Config& config) {
    try {
        auto conn = db::open_connection(config.database.url);
        pqxx::read_transaction tx(*conn);
        std::cout << "EVENTS BY STATUS AND TYPE\n";
        std::cout << std::left << std::setw(18) << "STATUS" << std::setw(32) << "EVENT TYPE" << "COUNT\n";
        for (const auto& row : tx.exec(kCountsSql)) {
            std::cout << std::setw(18) << safe(row[0].c_str()) << std::setw(32) << safe(row[1].c_str()) << row[2].c_str()
                      << "\n";
        }
        std::cout << "\noldest undelivered event: " << tx.exec(kOldestSql)[0][0].as<long long>() << "s old\n";
        std::cout << "blocked behind an earlier event of their aggregate: " << tx.exec(kBlockedSql)[0][0].c_str()
                  << " event(s)\n";
        const pqxx::result unhandled = tx.exec(kUnhandledSql);
        std::cout << "\nUNHANDLED EVENT TYPES (pending for over a minute, never claimed)\n";
        if (unhandled.empty()) std::cout << "none\n";
        for (const auto& row : unhandled) {
            std::cout << std::setw(32) << safe(row[0].c_str()) << row[1].c_str() << " event(s), oldest " << row[2].c_str()
                      << "s\n";
        }
        const pqxx::result review = tx.exec(kReviewSql);
        std::cout << "\nREVIEW_REQUIRED BY TYPE AND CODE\n";
        if (review.empty()) std::cout << "none\n";
        for (const auto& row : review) {
            std::cout << std::setw(32) << safe(row[0].c_str()) << std::setw(24) << safe(row[1].c_str()) << row[2].c_str()
                      << "\n";
        }
        std::cout << "\nrequire_registered_types: " << (tx.exec(kRequireRegisteredSql)[0][0].as<bool>() ? "true" : "false")
                  << " (outbox_publish() refuses unregistered event types when true; change it with "
                     "`outboxd migrate --require-registered-types=true|false`)\n";
        tx.commit();
        const auto paused = dispatch::read_paused_handlers(*conn);
        std::cout << "\nPAUSED HANDLERS (fleet-wide; their events wait)\n";
        if (paused.empty()) std::cout << "none\n";
        for (const auto& p : paused) {
            std::cout << std::setw(32) << safe(p.handler) << "paused since " << safe(p.paused_at) << " by " << safe(p.paused_by)
                      << "\n";
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
