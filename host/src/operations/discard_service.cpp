#include "operations/discard_service.hpp"

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

namespace outbox::operations {
namespace {

constexpr const char* kDiscardSql = R"SQL(
UPDATE event_publication
SET status = 'DISCARDED', completed_at = now(), version = version + 1,
    lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL, updated_at = now()
WHERE event_id = $1::uuid AND status IN ('REVIEW_REQUIRED', 'PENDING', 'RETRY_WAIT') AND version = $2
RETURNING version
)SQL";

// The aggregate's next waiting events may have other types than the discarded one: wake
// the hosts that handle those (delivered on commit).
constexpr const char* kNotifySuccessorsSql = R"SQL(
SELECT pg_notify('outboxd_events', t.event_type)
FROM (SELECT DISTINCT n.event_type
      FROM event_publication d
      JOIN event_publication n ON n.company_id = d.company_id AND n.aggregate_key = d.aggregate_key
                              AND n.aggregate_seq > d.aggregate_seq
      WHERE d.event_id = $1::uuid AND n.aggregate_seq IS NOT NULL
        AND n.status IN ('PENDING', 'PROCESSING', 'RETRY_WAIT', 'REVIEW_REQUIRED')) t
)SQL";

// A cancel is a discard of an event that has not failed yet: same record, audit and checks.
constexpr const char* kCancelSql = R"SQL(
UPDATE event_publication
SET status = 'DISCARDED', completed_at = now(), version = version + 1,
    lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL, updated_at = now()
WHERE event_id = $1::uuid AND status IN ('PENDING', 'RETRY_WAIT') AND version = $2
RETURNING version
)SQL";

void wake_successors(pqxx::work& tx, const std::string& event_id, const std::string&) {
    tx.exec_params(kNotifySuccessorsSql, event_id);
}

}  // namespace

std::string canonical_discard_request(const DiscardRequest& request) {
    return nlohmann::json{{"action", "discard"},
                          {"event_id", request.event_id},
                          {"expected_version", request.expected_version},
                          {"reason", request.reason}}
        .dump();
}

std::string canonical_cancel_request(const DiscardRequest& request) {
    return nlohmann::json{{"action", "cancel"},
                          {"event_id", request.event_id},
                          {"expected_version", request.expected_version},
                          {"reason", request.reason}}
        .dump();
}

DiscardResult DiscardService::cancel(DiscardRequest request) {
    static const EventAction kCancel{.action = core::OperatorAction::Cancel,
                                     .verb = "cancelled",
                                     .allowed = "a PENDING or RETRY_WAIT event",
                                     .record_table = "outbox_discard",
                                     .record_key = "discard_id",
                                     .audit_action = "outbox.cancel",
                                     .update_sql = kCancelSql,
                                     .bulk_keys_taken = false,
                                     .canonical = canonical_cancel_request,
                                     .wake = wake_successors};
    return run_event_action(conn_, kCancel, std::move(request));
}

DiscardResult DiscardService::discard(DiscardRequest request) {
    static const EventAction kDiscard{.action = core::OperatorAction::Discard,
                                      .verb = "discarded",
                                      .allowed = "a REVIEW_REQUIRED, PENDING or RETRY_WAIT event",
                                      .record_table = "outbox_discard",
                                      .record_key = "discard_id",
                                      .audit_action = "outbox.discard",
                                      .update_sql = kDiscardSql,
                                      .bulk_keys_taken = false,
                                      .canonical = canonical_discard_request,
                                      .wake = wake_successors};
    return run_event_action(conn_, kDiscard, std::move(request));
}

}  // namespace outbox::operations
