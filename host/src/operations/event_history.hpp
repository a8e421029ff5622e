#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>
#include <pqxx/connection>

#include "routing/handler_set.hpp"

namespace outbox::operations {

/// Which handlers consumed an event and the operators' actions on it (re-drives, one by one
/// or in bulk, and discards), oldest first; nullopt when `company_id` has no event
/// `event_id` (a lower-case UUID). A COMPLETED event's handlers that left no consumption row
/// are taken from `local` and the live hosts (recorded: false). The company's view: an action
/// taken with the CLI names its actor "operator", never the OS user. Throws on failure.
std::optional<nlohmann::json> read_event_history(pqxx::connection& conn, const routing::HandlerSet& local,
                                                 const std::string& event_id, const std::string& company_id);

}  // namespace outbox::operations
