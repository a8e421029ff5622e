#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>
#include <pqxx/connection>

#include "operations/retry_service.hpp"

namespace outbox::operations {

/// Which events an operator job takes: every given criterion must match, at least one is
/// required. status: one of the statuses the action accepts (absent: all of them).
/// occurred_after/before: RFC 3339 with an offset, occurred_at >= after and < before.
/// handler: events of a type the handler takes (as the fleet registry reports it) that it has
/// not consumed yet. no_error_code: only events without a last error code (refused with
/// last_error_code).
struct OperationFilter {
    std::optional<std::string> event_type;
    std::optional<std::string> last_error_code;
    bool no_error_code = false;
    std::optional<std::string> status;
    std::optional<std::string> occurred_after;
    std::optional<std::string> occurred_before;
    std::optional<std::string> aggregate_key;
    std::optional<std::string> handler;
};

/// An operator's request to act on every event a filter matches: "redrive" (REVIEW_REQUIRED
/// events, as a one-event retry), "discard" (REVIEW_REQUIRED, PENDING or RETRY_WAIT, as a
/// one-event discard), "cancel" (PENDING or RETRY_WAIT, as a one-event cancel) or "replay"
/// (COMPLETED or DISCARDED events of a type `handler` takes, run again by that handler alone,
/// which Context::replay() tells; paced by how fast the handler finishes them).
struct OperationRequest {
    std::string action;
    OperationFilter filter;
    std::optional<std::string> handler;     // "replay" only; refused for the other actions
    std::string reason;                     // 10 to 300 characters, as for one event
    bool dry_run = false;
    std::string idempotency_key;            // required unless dry_run
    std::string actor;                      // JWT `sub`, or "cli:<user>"
    std::optional<std::string> company_id;  // API: the caller's company; CLI: nullopt (every company)
    std::string channel;                    // "api" or "cli", recorded in the audit rows
};

/// A dry run's answer: how many events match now and the first of them (oldest first).
struct OperationPreview {
    long long count = 0;
    std::vector<std::string> sample_event_ids;
};

/// A job was created (or, `replayed`, the same key and request created it before).
struct OperationStarted {
    std::string operation_id;
    bool replayed = false;
};

using OperationStartResult = std::variant<OperationPreview, OperationStarted, RetryRejected>;

/// A job as stored: state "running", "done", "cancelled" or "failed"; total: the events
/// matching when it started; done: acted on; failed: matched but could not be acted on.
struct OperationStatus {
    std::string operation_id;
    std::string action;
    std::string state;
    long long total = 0;
    long long done = 0;
    long long failed = 0;
    std::string created_at;
    std::optional<std::string> finished_at;
    std::optional<std::string> error;
};

/// The statuses `action` may act on, narrowed to `status` when given; empty when the status
/// is not one of them (or the action is unknown).
std::vector<std::string> operation_statuses(const std::string& action, const std::optional<std::string>& status);

/// Checks the request's fields without a database; nullopt when they are well-formed.
std::optional<RetryRejected> validate_operation_request(const OperationRequest& request);

/// The canonical text whose SHA-256 is stored as request_hash (dry_run is not part of it).
std::string canonical_operation_request(const OperationRequest& request);

/// Shared by the admin API and the CLI. A dry run counts the matching events and samples
/// up to kOperationSample of them, changing nothing. Otherwise, in one transaction: requests
/// with the same key are serialized, a known key answers its job again (same request) or is
/// refused (another request), the job row is inserted with the count as its total, and an
/// audit_event row `outbox.operation_start` names it. The work is done later, in batches, by
/// work_operation_batch. Database failures are thrown.
OperationStartResult start_operation(pqxx::connection& conn, const OperationRequest& request);

/// The job, or nullopt when there is none with this id for `company_id` (nullopt: any).
std::optional<OperationStatus> read_operation(pqxx::connection& conn, const std::string& operation_id,
                                              const std::optional<std::string>& company_id);

/// The job as the API and `outboxd operations show|list --format json` answer it:
/// {"operation_id", "action", "state", "total", "done", "failed", "created_at", "finished_at"}.
nlohmann::json to_json(const OperationStatus& status);

/// The states a job can be in, for list filters.
inline constexpr std::array<std::string_view, 4> kOperationStates{"running", "done", "cancelled", "failed"};
/// The most jobs one list answers.
inline constexpr int kMaxOperationList = 100;

/// The newest jobs first (at most `limit`, 1..kMaxOperationList) of `company_id` (nullopt:
/// every company's and the fleet-wide ones), only those in `state` when given.
std::vector<OperationStatus> list_operations(pqxx::connection& conn, const std::optional<std::string>& company_id,
                                             const std::optional<std::string>& state, int limit);

/// Cancelling a job: a running job becomes "cancelled" (after the batch in flight, whose
/// events stay acted on) and an audit_event row `outbox.operation_cancel` is written; a job
/// already finished is left as it is (`changed` false).
struct OperationCancelled {
    OperationStatus status;
    bool changed = false;
};
std::optional<OperationCancelled> cancel_operation(pqxx::connection& conn, const std::string& operation_id,
                                                   const std::optional<std::string>& company_id,
                                                   const std::string& actor, const std::string& channel);

/// What one batch did: nothing to do (no running job free to take), or the job it worked.
struct OperationBatch {
    bool worked = false;
    std::string operation_id;
    long long read = 0;   // events read after the cursor (acted on or failed)
    long long acted = 0;
    bool finished = false;  // the job is over: nothing matches after the cursor, or it failed
    bool job_failed = false;  // a statement of the batch failed on its own: the job is "failed"
    bool deferred = false;    // a replay waiting for its earlier batches' events to finish
};

/// One batch of a running job (the one with `operation_id`, or the least recently worked
/// one), in one transaction: the job's row locked FOR UPDATE SKIP LOCKED (the claim: no two
/// hosts run a batch of one job at once, and a host that dies mid-batch leaves nothing
/// half-done), up to `batch_size` matching events after its cursor each acted on exactly as
/// the one-event action (record row, audit row, hosts woken), then the cursor and counters
/// moved. A job whose cursor reached the end becomes "done"; one whose batch fails on an SQL
/// error (a bug or a constraint: every retry would fail the same) becomes "failed". Lost
/// connections, timeouts and conflicts are thrown: the next batch tries again.
OperationBatch work_operation_batch(pqxx::connection& conn, int batch_size,
                                    const std::optional<std::string>& operation_id = std::nullopt);

/// Marks a running job "failed" with a short `error` (a batch failed for a reason that
/// retrying does not cure).
void fail_operation(pqxx::connection& conn, const std::string& operation_id, const std::string& error);

inline constexpr int kOperationSample = 20;
inline constexpr int kOperationBatchSize = 500;

}  // namespace outbox::operations
