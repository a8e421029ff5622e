#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <pqxx/connection>

#include "operations/retry_service.hpp"

namespace outbox::operations {

/// Which REVIEW_REQUIRED events a bulk re-drive takes: every given criterion must match (at
/// least event_type, last_error_code, no_error_code or event_ids is required), oldest first,
/// at most `limit`. No last_error_code means any code; no_error_code: only events without one.
struct BulkRetryFilter {
    std::optional<std::string> event_type;
    std::optional<std::string> last_error_code;
    bool no_error_code = false;  // last_error_code IS NULL; refused together with last_error_code
    std::optional<std::vector<std::string>> event_ids;  // 1 to kMaxBulkRetry lower-case UUIDs
    std::optional<std::string> occurred_before;  // RFC 3339 timestamp with offset: occurred_at < it
    int limit = 100;                             // 1 to kMaxBulkRetry
};

inline constexpr int kMaxBulkRetry = 1000;

/// An operator's request to re-drive a group of REVIEW_REQUIRED events.
struct BulkRetryRequest {
    BulkRetryFilter filter;
    std::string reason;                     // 10 to 300 characters, as for one event
    std::string idempotency_key;            // as for one event
    std::string actor;                      // JWT `sub`, or "cli:<user>"
    std::optional<std::string> company_id;  // API: the caller's company; CLI: nullopt (every company)
    std::string channel;                    // "api" or "cli", recorded in the audit rows
};

/// The events re-driven (oldest first; possibly none). `replayed`: the same key and the
/// same request were accepted before; these are that first result and nothing was done now.
struct BulkRetryAccepted {
    std::vector<std::string> event_ids;
    bool replayed = false;
};

using BulkRetryResult = std::variant<BulkRetryAccepted, RetryRejected>;

/// Checks the request's fields without a database; nullopt when they are well-formed.
std::optional<RetryRejected> validate_bulk_retry_request(const BulkRetryRequest& request);

/// The canonical text whose SHA-256 is stored as request_hash.
std::string canonical_bulk_retry_request(const BulkRetryRequest& request);

/// The bulk re-drive, shared by the admin API and the CLI. In one transaction: serialize
/// requests with the same key, replay or refuse a known key (also one used by a one-event
/// retry), lock the matching REVIEW_REQUIRED events (SKIP LOCKED: an event another
/// operator is re-driving right now is left to that request), move each to PENDING
/// exactly as a one-event retry does, insert the outbox_bulk_retry row and one
/// outbox_manual_retry and one audit_event row per event, NOTIFY the workers, commit.
/// Database failures are thrown; an in-doubt commit is safe to repeat with the same key.
class BulkRetryService {
public:
    explicit BulkRetryService(pqxx::connection& conn) : conn_(conn) {}

    BulkRetryResult retry(const BulkRetryRequest& request);

private:
    BulkRetryResult attempt(const BulkRetryRequest& request);

    pqxx::connection& conn_;
};

}  // namespace outbox::operations
