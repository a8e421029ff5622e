#pragma once

#include <optional>
#include <string>
#include <variant>

#include <pqxx/connection>
#include <pqxx/except>
#include <pqxx/result>
#include <pqxx/transaction>

namespace outbox::admin {

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

/// The first steps every single-event operator action (retry, discard) takes in its
/// transaction: bounded lock and statement waits, the SHA-256 of the Idempotency-Key and of
/// the canonical request, and the event's row locked — for an API caller only a row of its
/// own company, so another company's event is never waited for and answers like a missing
/// one. `event` holds (company_id, status, version, attempt_count, event_type) or is empty;
/// `company` is the caller's, or for the CLI the event's.
struct ActionStart {
    std::string key_hash;
    std::string request_hash;
    pqxx::result event;
    std::optional<std::string> company;
};
ActionStart start_event_action(pqxx::work& tx, const RetryRequest& request, const std::string& canonical_request);

/// Runs one operator action's transaction, again (three runs at most) when a concurrent
/// request took its Idempotency-Key first (the next run finds that request's record) or
/// PostgreSQL reports a serialization failure or a deadlock; the last failure propagates.
template <typename Attempt>
auto run_operator_transaction(Attempt&& attempt) -> decltype(attempt()) {
    constexpr int kRuns = 3;
    for (int run = 1;; ++run) {
        try {
            return attempt();
        } catch (const pqxx::unique_violation&) {
            if (run >= kRuns) throw;
        } catch (const pqxx::serialization_failure&) {
            if (run >= kRuns) throw;
        } catch (const pqxx::deadlock_detected&) {
            if (run >= kRuns) throw;
        }
    }
}

/// The canonical text whose SHA-256 is stored as request_hash: the same event, expected
/// version and reason always give the same text.
std::string canonical_retry_request(const RetryRequest& request);

/// The manual re-drive of a REVIEW_REQUIRED event, shared by the admin API and the CLI.
/// In one transaction: lock the event row, replay or refuse a known Idempotency-Key, check
/// status and version, move the event to PENDING (attempt_count 0, due now, version + 1,
/// no lease), insert the immutable outbox_manual_retry and audit_event rows, NOTIFY the
/// workers, commit. Two concurrent identical requests execute once: the second waits for
/// the row lock and then finds the first one's record; a key raced for two different events
/// is settled by the unique constraint. Database failures are thrown (the caller classifies
/// them with db::classify_db_error); an in-doubt commit is safe to repeat with the same key.
class RetryService {
public:
    explicit RetryService(pqxx::connection& conn) : conn_(conn) {}

    RetryResult retry(RetryRequest request);

private:
    RetryResult attempt(const RetryRequest& request);

    pqxx::connection& conn_;
};

}  // namespace outbox::admin
