#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <pqxx/connection>
#include <pqxx/transaction_base>

#include "metrics/prometheus.hpp"
#include "routing/handler_set.hpp"

namespace outbox::operations {

/// Reads the database gauges of /metrics in one statement under `timeout`: counts per
/// unfinished or reviewed status (each count is served by that status' partial index, never
/// by a scan of COMPLETED rows), the oldest unfinished event's age (PENDING, RETRY_WAIT due or
/// not, PROCESSING), the same per handler of `handlers` (types it supports, not yet consumed
/// by it), the oldest REVIEW_REQUIRED event's age and the number of events blocked behind an
/// earlier event of their aggregate. Throws on failure.
metrics::DbGauges read_db_gauges(pqxx::connection& conn, const routing::HandlerSet& handlers,
                                 std::chrono::milliseconds timeout);

/// A handler and the event types it supports.
struct HandlerTypes {
    std::string name;
    std::vector<std::string> event_types;
};

std::vector<HandlerTypes> handler_types_of(const routing::HandlerSet& handlers);

/// The per-handler part of read_db_gauges for one company: for each of `handlers` (every
/// one present, 0 when nothing waits), the age in seconds of the company's oldest unfinished
/// event (PENDING, RETRY_WAIT, PROCESSING) of a type it supports that it has not consumed.
/// The same SQL as the outbox_publications_oldest_delay_seconds{handler} gauge.
std::map<std::string, double> read_handler_oldest_delays(pqxx::transaction_base& tx,
                                                         const std::vector<HandlerTypes>& handlers,
                                                         const std::string& company_id);

/// A waiting event (PENDING or RETRY_WAIT) first in its aggregate, with later events it holds
/// back, whose type no handler in `handled_types` supports: nothing will ever run it, so its
/// successors wait until an operator discards it.
struct BlockingHead {
    std::string event_id;
    std::string company_id;
    std::string event_type;
    std::string status;
    long long successors = 0;  // waiting events of its aggregate after it
};

/// What `outboxd status` reports about events, across every company.
struct StatusReport {
    struct Count {
        std::string status;
        std::string event_type;
        long long count = 0;
    };
    /// A type with due events nobody has attempted for over a minute while nothing of it is
    /// in flight: no host in the fleet claims it. Events held back by their aggregate are not counted.
    struct Unhandled {
        std::string event_type;
        long long count = 0;
        long long oldest_seconds = 0;
    };
    struct ReviewGroup {
        std::string event_type;
        std::string code;  // "-" for none
        long long count = 0;
    };
    std::vector<Count> counts;       // by status, then type
    long long oldest_seconds = 0;    // the oldest PENDING, RETRY_WAIT or PROCESSING event's age
                                     // (from deliver_after when that is later)
    long long blocked = 0;           // waiting behind an earlier event of their aggregate
    std::vector<Unhandled> unhandled;
    std::vector<ReviewGroup> review;  // the largest group first
    std::vector<BlockingHead> blocking_heads;
};

/// At most 20 blocking heads (of `company_id`, or of every company), the most successors first.
std::vector<BlockingHead> read_unhandled_blocking_heads(pqxx::transaction_base& tx,
                                                        const std::vector<std::string>& handled_types,
                                                        const std::optional<std::string>& company_id);

/// Reads the report in one read-only transaction; `handled_types` are the event types the
/// live hosts' loaded handlers support (for `blocking_heads`). Throws on failure.
StatusReport read_status_report(pqxx::connection& conn, const std::vector<std::string>& handled_types);

/// SELECT 1 under `timeout`; throws when the database does not answer.
void ping_database(pqxx::connection& conn, std::chrono::milliseconds timeout);

}  // namespace outbox::operations
