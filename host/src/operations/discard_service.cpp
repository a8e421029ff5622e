#include "operations/discard_service.hpp"

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "db/event_sql.hpp"

namespace outbox::operations {
namespace {

void wake_successors(pqxx::work& tx, const std::string& event_id, const std::string&) {
    tx.exec_params(db::event_sql::kNotifySuccessors, event_id);
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
                                     .update_sql = db::event_sql::kCancel,
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
                                      .update_sql = db::event_sql::kDiscard,
                                      .bulk_keys_taken = false,
                                      .canonical = canonical_discard_request,
                                      .wake = wake_successors};
    return run_event_action(conn_, kDiscard, std::move(request));
}

}  // namespace outbox::operations
