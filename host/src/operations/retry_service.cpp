#include "operations/retry_service.hpp"

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "core/event_status.hpp"
#include "core/identifiers.hpp"
#include "db/event_sql.hpp"
#include "db/perform.hpp"
#include "operations/action_sql.hpp"
#include "operations/text.hpp"
#include "outbox/sdk/payload.hpp"

namespace outbox::operations {
namespace {

constexpr std::size_t kMinReason = 10;
constexpr std::size_t kMaxReason = 300;
constexpr std::size_t kMaxKey = 200;

// A key a bulk re-drive of this company used is taken as well (that was another request).
constexpr const char* kFindBulkRetrySql = R"SQL(
SELECT 1 FROM outbox_bulk_retry WHERE coalesce(company_id, '') = $1 AND idempotency_key_hash = $2
)SQL";

// Every action's record table has these columns (V5, V12).
std::string find_record_sql(const char* table) {
    return std::string("SELECT event_id::text, request_hash, new_version FROM ") + table +
           " WHERE company_id = $1 AND idempotency_key_hash = $2";
}

std::string insert_record_sql(const char* table) {
    return std::string("INSERT INTO ") + table +
           " (event_id, company_id, actor, reason, idempotency_key_hash, request_hash, previous_attempt_count, "
           "previous_status, previous_version, new_version) VALUES ($1::uuid, $2, $3, $4, $5, $6, $7, $8, $9, $10) "
           "RETURNING id";
}

constexpr const char* kInsertAuditSql = R"SQL(
INSERT INTO audit_event (actor, action, company_id, target_id, detail) VALUES ($1, $2, $3, $4, $5::jsonb)
)SQL";

// A host that handles this type claims it at once.
void wake_type(pqxx::work& tx, const std::string&, const std::string& event_type) {
    tx.exec_params(kNotifySql, event_type);
}

const EventAction kRetry{.action = core::OperatorAction::Retry,
                         .verb = "retried",
                         .allowed = "a REVIEW_REQUIRED event",
                         .record_table = "outbox_manual_retry",
                         .record_key = "manual_retry_id",
                         .audit_action = "outbox.manual_retry",
                         .update_sql = db::event_sql::kRedriveOne,
                         .bulk_keys_taken = true,
                         .canonical = canonical_retry_request,
                         .wake = wake_type};

RetryRejected bad_request(std::string code, std::string message) {
    return {RetryRejected::Kind::BadRequest, std::move(code), std::move(message)};
}


// The event's row: (company_id, status, version, attempt_count, event_type), or empty; the
// company is the caller's, or for the CLI the event's.
struct ActionStart {
    std::string key_hash;
    std::string request_hash;
    pqxx::result event;
    std::optional<std::string> company;
};

ActionStart start_event_action(pqxx::work& tx, const RetryRequest& request, const std::string& canonical_request) {
    tx.exec("SET LOCAL lock_timeout = '5s'");
    tx.exec("SET LOCAL statement_timeout = '10s'");
    ActionStart start;
    const pqxx::row hashes = tx.exec_params1(kHashSql, request.idempotency_key, canonical_request);
    start.key_hash = hashes[0].as<std::string>();
    start.request_hash = hashes[1].as<std::string>();
    start.event = request.company_id
                      ? tx.exec_params(db::event_sql::kLockOwnEvent, request.event_id, *request.company_id)
                      : tx.exec_params(db::event_sql::kLockEvent, request.event_id);
    start.company = request.company_id;
    if (!start.company && !start.event.empty()) start.company = start.event[0][0].as<std::string>();
    return start;
}

RetryResult attempt(pqxx::connection& conn, const EventAction& action, const RetryRequest& request) {
    pqxx::work tx(conn);
    const ActionStart start = start_event_action(tx, request, action.canonical(request));
    const pqxx::result& event = start.event;
    const std::optional<std::string>& company = start.company;

    if (company) {
        const pqxx::result earlier = tx.exec_params(find_record_sql(action.record_table), *company, start.key_hash);
        if (!earlier.empty()) {
            // The request hash covers the event id, so a match is necessarily this event.
            if (earlier[0][1].as<std::string>() == start.request_hash) {
                return RetryAccepted{earlier[0][0].as<std::string>(), earlier[0][2].as<long long>(), true};
            }
            return key_reused();
        }
        if (action.bulk_keys_taken && !tx.exec_params(kFindBulkRetrySql, *company, start.key_hash).empty()) {
            return key_reused();
        }
    }
    if (event.empty() || event[0][0].as<std::string>() != *company) {
        return RetryRejected{RetryRejected::Kind::NotVisible, "EVENT_NOT_ACCESSIBLE", "no such event"};
    }

    const std::string status = event[0][1].as<std::string>();
    const auto version = event[0][2].as<long long>();
    const int attempts = event[0][3].as<int>();
    const std::string event_type = event[0][4].as<std::string>();
    const auto current = core::status_from_text(status);
    if (!current || !core::operator_transition(*current, action.action)) {
        return RetryConflict{"NOT_IN_REVIEW",
                             std::string("only ") + action.allowed + " can be " + action.verb + "; it is " + status,
                             version, status};
    }
    if (version != request.expected_version) {
        return RetryConflict{"VERSION_CONFLICT",
                             "the event is at version " + std::to_string(version) + ", not " +
                                 std::to_string(request.expected_version) + "; re-read it and decide again",
                             version, status};
    }

    const auto new_version = tx.exec_params1(action.update_sql, request.event_id, version)[0].as<long long>();
    const auto record_id =
        tx.exec_params1(insert_record_sql(action.record_table), request.event_id, *company, request.actor,
                        request.reason, start.key_hash, start.request_hash, attempts, status, version, new_version)[0]
            .as<long long>();
    const nlohmann::json detail{{action.record_key, record_id},  {"channel", request.channel},
                                {"previous_status", status},     {"previous_attempt_count", attempts},
                                {"previous_version", version},   {"new_version", new_version}};
    tx.exec_params0(kInsertAuditSql, request.actor, action.audit_action, *company, request.event_id, detail.dump());
    action.wake(tx, request.event_id, event_type);
    tx.commit();
    return RetryAccepted{request.event_id, new_version, false};
}

}  // namespace

RetryRejected key_reused() {
    return RetryRejected{RetryRejected::Kind::Unprocessable, "IDEMPOTENCY_KEY_REUSED",
                         "this Idempotency-Key was already used for a different request; use a new key"};
}

std::optional<RetryRejected> validate_idempotency_key(const std::string& key) {
    if (key.empty()) return bad_request("MISSING_IDEMPOTENCY_KEY", "the Idempotency-Key header is required");
    const bool printable = std::all_of(key.begin(), key.end(), [](unsigned char c) { return c >= 0x20 && c < 0x7f; });
    if (key.size() > kMaxKey || !printable) {
        return bad_request("INVALID_IDEMPOTENCY_KEY", "the Idempotency-Key must be 1 to 200 printable ASCII characters");
    }
    return std::nullopt;
}

std::optional<RetryRejected> validate_reason(const std::string& reason) {
    const auto length = utf8_length(reason);
    if (!length || *length < kMinReason || *length > kMaxReason || has_control_characters(reason) || is_blank(reason)) {
        return RetryRejected{RetryRejected::Kind::Unprocessable, "INVALID_REASON",
                             "reason must be 10 to 300 characters of text (no control characters); do not include "
                             "personal data, tokens, payloads or exception text"};
    }
    // The same detectors as SafePayload's free text: the reason is stored and shown to
    // operators, so it must not carry personal data. The answer names the rule only.
    if (const char* rule = sdk::string_field_rule(reason)) {
        return RetryRejected{RetryRejected::Kind::Unprocessable, "INVALID_REASON",
                             std::string("reason: ") + rule + "; do not include personal data or tokens"};
    }
    return std::nullopt;
}

std::optional<RetryRejected> validate_retry_request(RetryRequest& request) {
    if (auto rejected = validate_idempotency_key(request.idempotency_key)) return rejected;
    if (!core::is_uuid(request.event_id)) return bad_request("INVALID_EVENT_ID", "the event id must be a UUID");
    std::transform(request.event_id.begin(), request.event_id.end(), request.event_id.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (request.expected_version < 1) {
        return bad_request("INVALID_EXPECTED_VERSION", "expected_version must be a positive integer");
    }
    return validate_reason(request.reason);
}

std::string canonical_retry_request(const RetryRequest& request) {
    // nlohmann::json orders keys and escapes strings deterministically.
    return nlohmann::json{{"event_id", request.event_id},
                          {"expected_version", request.expected_version},
                          {"reason", request.reason}}
        .dump();
}

RetryResult RetryService::retry(RetryRequest request) { return run_event_action(conn_, kRetry, std::move(request)); }

RetryResult run_event_action(pqxx::connection& conn, const EventAction& action, RetryRequest request) {
    if (auto rejected = validate_retry_request(request)) return *rejected;
    return db::perform([&] { return attempt(conn, action, request); }, db::kOperatorTransaction);
}

}  // namespace outbox::operations
