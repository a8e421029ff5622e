#include "admin/discard_service.hpp"

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "core/transition.hpp"

namespace outbox::admin {
namespace {

constexpr const char* kFindDiscardSql = R"SQL(
SELECT event_id::text, request_hash, new_version
FROM outbox_discard WHERE company_id = $1 AND idempotency_key_hash = $2
)SQL";

constexpr const char* kDiscardSql = R"SQL(
UPDATE event_publication
SET status = 'DISCARDED', completed_at = now(), version = version + 1,
    lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL, updated_at = now()
WHERE event_id = $1::uuid AND status = 'REVIEW_REQUIRED' AND version = $2
RETURNING version
)SQL";

constexpr const char* kInsertDiscardSql = R"SQL(
INSERT INTO outbox_discard (event_id, company_id, actor, reason, idempotency_key_hash, request_hash,
                            previous_attempt_count, previous_status, previous_version, new_version)
VALUES ($1::uuid, $2, $3, $4, $5, $6, $7, $8, $9, $10)
RETURNING id
)SQL";

constexpr const char* kInsertAuditSql = R"SQL(
INSERT INTO audit_event (actor, action, company_id, target_id, detail)
VALUES ($1, 'outbox.discard', $2, $3, $4::jsonb)
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

}  // namespace

std::string canonical_discard_request(const DiscardRequest& request) {
    return nlohmann::json{{"action", "discard"},
                          {"event_id", request.event_id},
                          {"expected_version", request.expected_version},
                          {"reason", request.reason}}
        .dump();
}

DiscardResult DiscardService::discard(DiscardRequest request) {
    if (auto rejected = validate_retry_request(request)) return *rejected;
    return run_operator_transaction([&] { return this->attempt(request); });
}

DiscardResult DiscardService::attempt(const DiscardRequest& request) {
    pqxx::work tx(conn_);
    const ActionStart start = start_event_action(tx, request, canonical_discard_request(request));
    const std::string& key_hash = start.key_hash;
    const std::string& request_hash = start.request_hash;
    const pqxx::result& event = start.event;
    const std::optional<std::string>& company = start.company;

    if (company) {
        const pqxx::result earlier = tx.exec_params(kFindDiscardSql, *company, key_hash);
        if (!earlier.empty()) {
            if (earlier[0][1].as<std::string>() == request_hash) {
                return DiscardAccepted{earlier[0][0].as<std::string>(), earlier[0][2].as<long long>(), true};
            }
            return RetryRejected{RetryRejected::Kind::Unprocessable, "IDEMPOTENCY_KEY_REUSED",
                                 "this Idempotency-Key was already used for a different request; use a new key"};
        }
    }
    if (event.empty() || event[0][0].as<std::string>() != *company) {
        return RetryRejected{RetryRejected::Kind::NotVisible, "EVENT_NOT_ACCESSIBLE", "no such event"};
    }

    const std::string status = event[0][1].as<std::string>();
    const auto version = event[0][2].as<long long>();
    const int attempts = event[0][3].as<int>();
    const auto current = core::status_from_text(status);
    if (!current || !core::operator_transition(*current, core::OperatorAction::Discard)) {
        return RetryConflict{"NOT_IN_REVIEW", "only a REVIEW_REQUIRED event can be discarded; it is " + status,
                             version, status};
    }
    if (version != request.expected_version) {
        return RetryConflict{"VERSION_CONFLICT",
                             "the event is at version " + std::to_string(version) + ", not " +
                                 std::to_string(request.expected_version) + "; re-read it and decide again",
                             version, status};
    }

    const auto new_version = tx.exec_params1(kDiscardSql, request.event_id, version)[0].as<long long>();
    const auto discard_id = tx.exec_params1(kInsertDiscardSql, request.event_id, *company, request.actor,
                                            request.reason, key_hash, request_hash, attempts, status, version,
                                            new_version)[0]
                                .as<long long>();
    const nlohmann::json detail{{"discard_id", discard_id},      {"channel", request.channel},
                                {"previous_status", status},     {"previous_attempt_count", attempts},
                                {"previous_version", version},   {"new_version", new_version}};
    tx.exec_params0(kInsertAuditSql, request.actor, *company, request.event_id, detail.dump());
    tx.exec_params(kNotifySuccessorsSql, request.event_id);
    tx.commit();
    return DiscardAccepted{request.event_id, new_version, false};
}

}  // namespace outbox::admin
