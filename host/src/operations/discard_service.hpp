#pragma once

#include <pqxx/connection>

#include "operations/retry_service.hpp"

namespace outbox::operations {

/// An operator's request to give up on one event: the same fields, checks
/// and Idempotency-Key semantics as a retry (validate_retry_request).
using DiscardRequest = RetryRequest;
/// The event is DISCARDED at `version` (202); `replayed` as for a retry.
using DiscardAccepted = RetryAccepted;
using DiscardResult = RetryResult;

/// The canonical text whose SHA-256 is stored as request_hash; it names the action, so a
/// retry and a discard never share a request hash.
std::string canonical_discard_request(const DiscardRequest& request);
std::string canonical_cancel_request(const DiscardRequest& request);

/// Moves a REVIEW_REQUIRED, PENDING or RETRY_WAIT event (never a PROCESSING one: a handler
/// may be running it) to DISCARDED (completed_at now, version + 1), shared by
/// every caller, as one EventAction recorded in outbox_discard; the hosts are woken for the
/// aggregate's next events. A discarded event is never run again; its aggregate's later
/// events are no longer held back by it. Failures are thrown as for RetryService.
class DiscardService {
public:
    explicit DiscardService(pqxx::connection& conn) : conn_(conn) {}

    DiscardResult discard(DiscardRequest request);
    /// The same for a PENDING or RETRY_WAIT event only (a REVIEW_REQUIRED one answers 409):
    /// recorded in outbox_discard like a discard, audited as outbox.cancel.
    DiscardResult cancel(DiscardRequest request);

private:
    pqxx::connection& conn_;
};

}  // namespace outbox::operations
