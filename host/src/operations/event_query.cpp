#include "operations/event_query.hpp"

#include <algorithm>
#include <array>
#include <charconv>

#include <pqxx/pqxx>

#include "core/event_status.hpp"
#include "core/identifiers.hpp"
#include "core/parse_number.hpp"
#include "db/event_sql.hpp"

namespace outbox::operations {
namespace {

using core::parse_number;

struct Cursor {
    long long micros;
    std::string event_id;
};

std::optional<Cursor> decode_cursor(const std::string& cursor) {
    const auto dot = cursor.find('.');
    if (dot == std::string::npos) return std::nullopt;
    const auto micros = parse_number<long long>(std::string_view(cursor).substr(0, dot));
    std::string id = cursor.substr(dot + 1);
    if (!micros || !core::is_lower_uuid(id)) return std::nullopt;
    return Cursor{*micros, std::move(id)};
}

void prepare(pqxx::work& tx) {
    tx.exec("SET LOCAL statement_timeout = '5s'");
    tx.exec("SET LOCAL TIME ZONE 'UTC'");
}

}  // namespace

std::optional<FilterError> parse_event_filter(const std::optional<std::string>& status,
                                              const std::optional<std::string>& event_type,
                                              const std::optional<std::string>& last_error_code,
                                              const std::optional<std::string>& limit,
                                              const std::optional<std::string>& cursor, EventFilter& filter) {
    if (status) {
        if (std::find(core::kStatusTexts.begin(), core::kStatusTexts.end(), *status) == core::kStatusTexts.end()) {
            return FilterError{"INVALID_STATUS",
                               "status must be one of PENDING, PROCESSING, RETRY_WAIT, COMPLETED, REVIEW_REQUIRED, DISCARDED"};
        }
        filter.status = status;
    }
    if (event_type) {
        if (!core::is_event_type(*event_type)) {
            return FilterError{"INVALID_EVENT_TYPE", "event_type must be PascalCase letters and digits"};
        }
        filter.event_type = event_type;
    }
    if (last_error_code) {
        // The column's own check: what an error code can look like.
        if (!core::is_error_code(*last_error_code)) {
            return FilterError{"INVALID_LAST_ERROR_CODE",
                               "last_error_code must be an error code: upper-case letters, digits and _, e.g. HTTP_503"};
        }
        filter.last_error_code = last_error_code;
    }
    filter.limit = kDefaultListLimit;
    if (limit) {
        const auto value = parse_number<int>(*limit);
        if (!value || *value < 1 || *value > kMaxListLimit) {
            return FilterError{"INVALID_LIMIT", "limit must be a whole number from 1 to " + std::to_string(kMaxListLimit)};
        }
        filter.limit = *value;
    }
    if (cursor) {
        if (!decode_cursor(*cursor)) {
            return FilterError{"INVALID_CURSOR", "cursor must be a next_cursor value returned by this API"};
        }
        filter.cursor = cursor;
    }
    return std::nullopt;
}

std::optional<nlohmann::json> EventQuery::get(const std::string& company_id, const std::string& event_id) {
    pqxx::work tx(conn_);
    prepare(tx);
    const pqxx::result rows = tx.exec_params(db::event_sql::kEventGet, event_id, company_id);
    tx.commit();
    if (rows.empty()) return std::nullopt;
    return nlohmann::json::parse(rows[0][0].c_str());
}

nlohmann::json EventQuery::list(const std::string& company_id, const EventFilter& filter) {
    std::optional<long long> after_micros;
    std::optional<std::string> after_id;
    if (filter.cursor) {
        if (const auto cursor = decode_cursor(*filter.cursor)) {
            after_micros = cursor->micros;
            after_id = cursor->event_id;
        }
    }
    pqxx::work tx(conn_);
    prepare(tx);
    // One row more than asked tells whether there is a next page.
    const pqxx::result rows = tx.exec_params(db::event_sql::kEventList, company_id, filter.status, filter.event_type,
                                             after_micros, after_id, filter.limit + 1, filter.last_error_code);
    tx.commit();
    nlohmann::json events = nlohmann::json::array();
    const auto shown = std::min<std::size_t>(rows.size(), static_cast<std::size_t>(filter.limit));
    for (std::size_t i = 0; i < shown; ++i) events.push_back(nlohmann::json::parse(rows[i][0].c_str()));
    nlohmann::json next = nullptr;
    if (rows.size() > shown) {
        const auto& last = rows[shown - 1];
        next = std::string(last[1].c_str()) + "." + last[2].c_str();
    }
    return nlohmann::json{{"events", std::move(events)}, {"next_cursor", std::move(next)}};
}

}  // namespace outbox::operations
