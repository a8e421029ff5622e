#pragma once

#include <chrono>

#include <pqxx/connection>

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

/// SELECT 1 under `timeout`; throws when the database does not answer.
void ping_database(pqxx::connection& conn, std::chrono::milliseconds timeout);

}  // namespace outbox::admin
