#pragma once

#include <string>

#include <nlohmann/json.hpp>
#include <pqxx/connection>

#include "routing/handler_set.hpp"

namespace outbox::operations {

/// What the console's overview shows for one company: counts per status and per (event
/// type, status), each handler's oldest unfinished event (this host's handlers and those
/// every live host reports), completions and failures per minute over the last hour, the
/// waiting heads that block their aggregate while no known handler supports their type
/// (`blocking_heads`, read_unhandled_blocking_heads), and when it was read. Counts, ages and codes only: no payload is ever read. Throws on failure.
nlohmann::json read_overview(pqxx::connection& conn, const routing::HandlerSet& local, const std::string& company_id);

/// {"groups": [...]}: the company's REVIEW_REQUIRED events by (event type, error code), the
/// largest group first, each with its count and oldest and newest occurred_at.
nlohmann::json read_review_groups(pqxx::connection& conn, const std::string& company_id);

}  // namespace outbox::operations
