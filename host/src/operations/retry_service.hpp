#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

#include <pqxx/connection>
#include <pqxx/result>
#include <pqxx/transaction>

#include "core/transition.hpp"

namespace outbox::operations {

/// An operator's request to re-drive one REVIEW_REQUIRED event.
struct RetryRequest {
    std::string event_id;
    long long expected_version = 0;
    std::string reason;                     // 10 to 300 characters, no control characters
    std::string idempotency_key;            // 1 to 200 printable ASCII characters
    std::string actor;                      // JWT `sub`, or "cli:<user>"
    std::optional<std::string> company_id;  // API: the caller's company; CLI: nullopt (the event's own)
    std::string channel;                    // "api" or "cli", recorded in the audit row
};

/// The event is PENDING again at `version` (202). `replayed`: the same key and the same
/// request were accepted before; this is that first result and nothing was executed now.
struct RetryAccepted {
    std::string event_id;
    long long version = 0;
    bool replayed = false;
};

/// The event is not in REVIEW_REQUIRED or not at the expected version (409).
struct RetryConflict {
    std::string code;  // VERSION_CONFLICT or NOT_IN_REVIEW
    std::string message;
    long long current_version = 0;
    std::string current_status;
};

/// The request was refused before anything changed.
struct RetryRejected {
    enum class Kind {
        BadRequest,     // 400: missing or malformed key, event id or expected_version
        Unprocessable,  // 422: reason out of bounds, or the key was used for another request
        NotVisible,     // no such event for this caller (the API answers 403 whether it exists elsewhere or not)
    };
    Kind kind = Kind::BadRequest;
    std::string code;
    std::string message;
};

/// A 422 refusal with its code and message.
inline RetryRejected unprocessable(std::string code, std::string message) {
    return {RetryRejected::Kind::Unprocessable, std::move(code), std::move(message)};
}

using RetryResult = std::variant<RetryAccepted, RetryConflict, RetryRejected>;

/// The Idempotency-Key rule shared by every operator action: 1 to 200 printable ASCII
/// characters (missing: 400 MISSING_IDEMPOTENCY_KEY, malformed: 400 INVALID_IDEMPOTENCY_KEY).
std::optional<RetryRejected> validate_idempotency_key(const std::string& key);
/// 422 IDEMPOTENCY_KEY_REUSED: the key was used for another request.
RetryRejected key_reused();
/// The reason rule shared by every operator action: 10 to 300 characters of text (422 INVALID_REASON).
std::optional<RetryRejected> validate_reason(const std::string& reason);

/// Checks the request's fields without a database; nullopt when they are well-formed.
/// Normalizes the event id to lower case.
std::optional<RetryRejected> validate_retry_request(RetryRequest& request);

/// The canonical text whose SHA-256 is stored as request_hash: the same event, expected
/// version and reason always give the same text.
std::string canonical_retry_request(const RetryRequest& request);

/// One single-event operator action (retry, discard). Every action takes the same steps,
/// in one transaction: bounded lock and statement waits; the event's row locked (for an
/// API caller only a row of its own company, so another company's event is never waited
/// for and answers like a missing one); a known Idempotency-Key replayed or refused; the
/// status checked with core::operator_transition and the version compared; then
/// `update_sql` ($1 event id, $2 version; RETURNING the new version), a row in
/// `record_table`, an audit_event row `audit_action` naming that row as `record_key`, and
/// `wake` (NOTIFY, delivered on commit).
struct EventAction {
    core::OperatorAction action;
    const char* verb;          // "retried", "discarded": the NOT_IN_REVIEW message
    const char* allowed;       // the statuses core::operator_transition accepts, for that message
    const char* record_table;  // immutable, one row per action: outbox_manual_retry, outbox_discard
    const char* record_key;    // the record's id in the audit detail: manual_retry_id, discard_id
    const char* audit_action;  // outbox.manual_retry, outbox.discard
    const char* update_sql;
    bool bulk_keys_taken;      // a key a bulk re-drive of the company used is refused too
    std::string (*canonical)(const RetryRequest&);
    void (*wake)(pqxx::work& tx, const std::string& event_id, const std::string& event_type);
};

/// Validates `request` and runs `action` under db::kOperatorTransaction. Two concurrent
/// identical requests execute once: the second waits for the row lock and then finds the
/// first one's record; a key raced for two different events is settled by the unique
/// constraint. Database failures are thrown (the caller classifies them with
/// db::classify_db_error); an in-doubt commit is safe to repeat with the same key.
RetryResult run_event_action(pqxx::connection& conn, const EventAction& action, RetryRequest request);

/// The manual re-drive of a REVIEW_REQUIRED event, shared by the admin API and the CLI:
/// PENDING again, attempt_count 0, due now, version + 1, no lease; recorded in
/// outbox_manual_retry; the hosts handling its type are woken.
class RetryService {
public:
    explicit RetryService(pqxx::connection& conn) : conn_(conn) {}

    RetryResult retry(RetryRequest request);

private:
    pqxx::connection& conn_;
};

}  // namespace outbox::operations
