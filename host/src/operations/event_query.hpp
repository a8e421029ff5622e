#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>
#include <pqxx/connection>

namespace outbox::operations {

/// Filters of the event list. Every field is validated by parse_event_filter.
struct EventFilter {
    std::optional<std::string> status;
    std::optional<std::string> event_type;
    std::optional<std::string> last_error_code;
    int limit = 50;
    std::optional<std::string> cursor;  // opaque: "<occurred_at in µs>.<event_id>" of the last row seen
};

inline constexpr int kDefaultListLimit = 50;
inline constexpr int kMaxListLimit = 200;

/// Why a filter was refused (HTTP 400).
struct FilterError {
    std::string code;
    std::string message;
};

/// Builds a filter from query parameters (absent: nullopt). Returns the error for a status
/// that is not one of the six, a malformed event type or error code, a limit outside
/// 1..200, or a cursor this server did not produce.
std::optional<FilterError> parse_event_filter(const std::optional<std::string>& status,
                                              const std::optional<std::string>& event_type,
                                              const std::optional<std::string>& last_error_code,
                                              const std::optional<std::string>& limit,
                                              const std::optional<std::string>& cursor, EventFilter& filter);

/// Read-only views of events for operators, always scoped to one company. Payloads are
/// never read: the result carries identifiers, state and safe codes only, and no
/// lease_owner (a host name and pid of the platform's).
class EventQuery {
public:
    explicit EventQuery(pqxx::connection& conn) : conn_(conn) {}

    /// The event as a JSON object, or nullopt when `company_id` has no event `event_id`
    /// (`event_id` must be a UUID).
    std::optional<nlohmann::json> get(const std::string& company_id, const std::string& event_id);

    /// {"events": [...], "next_cursor": "..." | null}, newest occurred_at first.
    nlohmann::json list(const std::string& company_id, const EventFilter& filter);

private:
    pqxx::connection& conn_;
};

}  // namespace outbox::operations
