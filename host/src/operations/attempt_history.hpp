#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>
#include <pqxx/connection>

namespace outbox::operations {

/// An event's attempts from outbox_attempt, one entry per handler call (and per lost host),
/// oldest first: {"attempts": [{"attempt", "handler", "host", "started_at", "ended_at",
/// "outcome", "error_code", "retry_after"}]}. nullopt when there is no event `event_id` (a
/// lower-case UUID) of `company_id` (any company when nullopt: the CLI). `with_hosts` false
/// answers "host": null (a company's view: host names are the platform's, as lease_owner is).
/// Throws on failure.
std::optional<nlohmann::json> read_attempts(pqxx::connection& conn, const std::string& event_id,
                                            const std::optional<std::string>& company_id, bool with_hosts);

}  // namespace outbox::operations
