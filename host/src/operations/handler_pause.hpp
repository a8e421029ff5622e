#pragma once

#include <string>

#include <pqxx/connection>

namespace outbox::operations {

/// Pauses (`paused`) or resumes `handler` fleet-wide in one transaction: the
/// outbox_handler_pause row, an audit_event row when something changed, and a NOTIFY on
/// routing::kHandlerNotifyChannel. Returns whether anything changed (pausing a paused
/// handler changes nothing, except that pausing a handler an open circuit breaker paused
/// makes the pause the operator's; resuming it closes the breaker).
bool set_handler_paused(pqxx::connection& conn, const std::string& handler, bool paused, const std::string& actor,
                        const std::string& channel);

}  // namespace outbox::operations
