#include "operations/bulk_retry_service.hpp"

#include <regex>
#include <set>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "core/identifiers.hpp"
#include "db/event_sql.hpp"
#include "db/perform.hpp"
#include "db/pg_array.hpp"
#include "operations/action_sql.hpp"

namespace outbox::operations {
namespace {


RetryRejected bad_timestamp() {
    return unprocessable("INVALID_OCCURRED_BEFORE",
                         "occurred_before must be an RFC 3339 timestamp with an offset, e.g. 2026-11-30T12:00:00Z");
}

// Requests with the same key wait for each other: the second then finds the first's row.
constexpr const char* kKeyLockSql = "SELECT pg_advisory_xact_lock(hashtext('outboxd:bulk-retry:' || $1 || ':' || $2))";

constexpr const char* kFindBulkSql = R"SQL(
SELECT request_hash, array_to_string(event_ids, ',') FROM outbox_bulk_retry
WHERE coalesce(company_id, '') = $1 AND idempotency_key_hash = $2
)SQL";

// Without a company (CLI), a key any one-event retry used is taken.
constexpr const char* kFindSingleSql = R"SQL(
SELECT 1 FROM outbox_manual_retry WHERE ($1 = '' OR company_id = $1) AND idempotency_key_hash = $2 LIMIT 1
)SQL";

constexpr const char* kInsertBulkSql = R"SQL(
INSERT INTO outbox_bulk_retry (company_id, actor, reason, idempotency_key_hash, request_hash, filter, event_ids)
VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7::uuid[])
RETURNING id
)SQL";

std::vector<std::string> split_ids(const std::string& text) {
    std::vector<std::string> ids;
    std::size_t start = 0;
    while (start < text.size()) {
        const auto comma = text.find(',', start);
        ids.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return ids;
}

}  // namespace

std::optional<RetryRejected> validate_bulk_retry_request(const BulkRetryRequest& request) {
    if (auto rejected = validate_idempotency_key(request.idempotency_key)) return rejected;
    const auto& f = request.filter;
    if (!f.event_type && !f.last_error_code && !f.no_error_code && !f.event_ids) {
        return unprocessable("INVALID_FILTER",
                             "the filter needs event_type, last_error_code, no_error_code, event_ids or several of them");
    }
    if (f.no_error_code && f.last_error_code) {
        return unprocessable("INVALID_FILTER", "no_error_code and last_error_code exclude each other: send one of them");
    }
    if (f.event_ids) {
        if (f.event_ids->empty() || f.event_ids->size() > static_cast<std::size_t>(kMaxBulkRetry)) {
            return unprocessable("INVALID_FILTER", "event_ids must list 1 to " + std::to_string(kMaxBulkRetry) + " event ids");
        }
        for (const auto& id : *f.event_ids) {
            if (!core::is_lower_uuid(id)) {
                return unprocessable("INVALID_FILTER", "every event id in event_ids must be a lower-case UUID");
            }
        }
    }
    static const std::regex time_pattern(
        "^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\\.[0-9]{1,9})?)?([Zz]|[+-][0-9]{2}(:?[0-9]{2})?)$");
    if (f.event_type && !core::is_event_type(*f.event_type)) {
        return unprocessable("INVALID_FILTER", "event_type must be PascalCase letters and digits, e.g. MissionCompleted");
    }
    if (f.last_error_code && !core::is_error_code(*f.last_error_code)) {
        return unprocessable("INVALID_FILTER", "last_error_code must be an error code such as HTTP_503");
    }
    if (f.occurred_before && !std::regex_match(*f.occurred_before, time_pattern)) return bad_timestamp();
    if (f.limit < 1 || f.limit > kMaxBulkRetry) {
        return unprocessable("INVALID_LIMIT", "limit must be 1 to " + std::to_string(kMaxBulkRetry));
    }
    return validate_reason(request.reason);
}

std::string canonical_bulk_retry_request(const BulkRetryRequest& request) {
    const auto& f = request.filter;
    const auto opt = [](const std::optional<std::string>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
    nlohmann::json filter{{"event_type", opt(f.event_type)},
                          {"last_error_code", opt(f.last_error_code)},
                          {"occurred_before", opt(f.occurred_before)},
                          {"limit", f.limit}};
    // Only when given, so a request without ids hashes as it did before they existed; the
    // same set of ids in any order is the same request.
    if (f.event_ids) filter["event_ids"] = std::set<std::string>(f.event_ids->begin(), f.event_ids->end());
    if (f.no_error_code) filter["no_error_code"] = true;  // likewise
    return nlohmann::json{{"filter", std::move(filter)}, {"reason", request.reason}}.dump();
}

BulkRetryResult BulkRetryService::retry(const BulkRetryRequest& request) {
    if (auto rejected = validate_bulk_retry_request(request)) return *rejected;
    return db::perform([&] { return this->attempt(request); }, db::kOperatorTransaction);
}

BulkRetryResult BulkRetryService::attempt(const BulkRetryRequest& request) {
    const auto& f = request.filter;
    pqxx::work tx(conn_);
    tx.exec("SET LOCAL lock_timeout = '5s'");
    tx.exec("SET LOCAL statement_timeout = '30s'");
    if (f.occurred_before) {
        // The pattern passed; PostgreSQL still refuses impossible dates such as 2026-02-30.
        try {
            tx.exec_params("SELECT $1::timestamptz", *f.occurred_before);
        } catch (const pqxx::data_exception&) {
            return bad_timestamp();
        }
    }
    const std::string company = request.company_id.value_or("");
    const pqxx::row hashes = tx.exec_params1(kHashSql, request.idempotency_key, canonical_bulk_retry_request(request));
    const std::string key_hash = hashes[0].as<std::string>();
    const std::string request_hash = hashes[1].as<std::string>();
    tx.exec_params(kKeyLockSql, company, key_hash);

    const pqxx::result earlier = tx.exec_params(kFindBulkSql, company, key_hash);
    if (!earlier.empty()) {
        if (earlier[0][0].as<std::string>() != request_hash) return key_reused();
        return BulkRetryAccepted{split_ids(earlier[0][1].as<std::string>()), true};
    }
    if (!tx.exec_params(kFindSingleSql, company, key_hash).empty()) return key_reused();

    std::vector<std::string> ids;
    std::vector<std::string> attempts;
    const std::optional<std::string> event_ids = f.event_ids ? std::optional(db::pg_array(*f.event_ids)) : std::nullopt;
    for (const auto& row : tx.exec_params(db::event_sql::kBulkRetrySelect, request.company_id, f.event_type,
                                          f.last_error_code, f.occurred_before, f.limit, event_ids, f.no_error_code)) {
        ids.push_back(row[0].as<std::string>());
        attempts.push_back(row[1].as<std::string>());
    }
    const nlohmann::json filter = nlohmann::json::parse(canonical_bulk_retry_request(request))["filter"];
    const auto bulk_id = tx.exec_params1(kInsertBulkSql, request.company_id, request.actor, request.reason, key_hash,
                                         request_hash, filter.dump(), db::pg_array(ids))[0]
                             .as<long long>();
    if (!ids.empty()) {
        const pqxx::result types =
            tx.exec_params(db::event_sql::kBulkRedrive, db::pg_array(ids), db::pg_array(attempts), request.actor,
                           request.reason, key_hash, request_hash, bulk_id, request.channel);
        // Delivered on commit; hosts that handle these types claim them at once.
        for (const auto& row : types) tx.exec_params(kNotifySql, row[0].as<std::string>());
    }
    tx.commit();
    return BulkRetryAccepted{std::move(ids), false};
}

}  // namespace outbox::operations
