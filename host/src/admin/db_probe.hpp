#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include <pqxx/connection>
#include <pqxx/transaction_base>

#include "dispatch/handler_set.hpp"
#include "metrics/prometheus.hpp"

namespace outbox::admin {

/// Reads the database gauges of /metrics in one statement under `timeout`: counts per
/// unfinished or reviewed status (each count is served by that status' partial index, never
/// by a scan of COMPLETED rows), the oldest unfinished event's age (PENDING, RETRY_WAIT due or
/// not, PROCESSING), the same per handler of `handlers` (types it supports, not yet consumed
/// by it), the oldest REVIEW_REQUIRED event's age and the number of events blocked behind an
/// earlier event of their aggregate. Throws on failure.
metrics::DbGauges read_db_gauges(pqxx::connection& conn, const dispatch::HandlerSet& handlers,
                                 std::chrono::milliseconds timeout);

/// A handler and the event types it supports.
struct HandlerTypes {
    std::string name;
    std::vector<std::string> event_types;
};

std::vector<HandlerTypes> handler_types_of(const dispatch::HandlerSet& handlers);

/// The per-handler part of read_db_gauges for one company: for each of `handlers` (every
/// one present, 0 when nothing waits), the age in seconds of the company's oldest unfinished
/// event (PENDING, RETRY_WAIT, PROCESSING) of a type it supports that it has not consumed.
/// The same SQL as the outbox_publications_oldest_delay_seconds{handler} gauge.
std::map<std::string, double> read_handler_oldest_delays(pqxx::transaction_base& tx,
                                                         const std::vector<HandlerTypes>& handlers,
                                                         const std::string& company_id);

/// SELECT 1 under `timeout`; throws when the database does not answer.
void ping_database(pqxx::connection& conn, std::chrono::milliseconds timeout);

}  // namespace outbox::admin
