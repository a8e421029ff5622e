#include "operations/operation_job.hpp"

#include <algorithm>
#include <regex>
#include <tuple>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "core/identifiers.hpp"
#include "db/db_error.hpp"
#include "db/event_sql.hpp"
#include "db/perform.hpp"
#include "db/pg_array.hpp"
#include "operations/action_sql.hpp"
#include "operations/text.hpp"

namespace outbox::operations {
namespace {

using nlohmann::json;

RetryRejected bad_time(const char* field) {
    return unprocessable("INVALID_TIME", std::string(field) +
                                             " must be an RFC 3339 timestamp with an offset, e.g. 2026-11-30T12:00:00Z");
}

// Requests with the same key wait for each other: the second then finds the first's row.
constexpr const char* kOperationKeyLockSql =
    "SELECT pg_advisory_xact_lock(hashtext('outboxd:operation:' || $1 || ':' || $2))";

constexpr const char* kFindSql = R"SQL(
SELECT id::text, request_hash FROM outbox_operation WHERE coalesce(company_id, '') = $1 AND idempotency_key_hash = $2
)SQL";

constexpr const char* kInsertSql = R"SQL(
INSERT INTO outbox_operation (company_id, action, filter, handler, actor, reason, channel, idempotency_key_hash,
                              request_hash, total, until_at)
VALUES ($1, $2, $3::jsonb, $4, $5, $6, $7, $8, $9, $10, $11::timestamptz)
RETURNING id::text
)SQL";

constexpr const char* kOperationAuditSql = R"SQL(
INSERT INTO audit_event (actor, action, company_id, target_id, detail) VALUES ($1, $2, $3, $4, $5::jsonb)
)SQL";

constexpr const char* kStatusColumns = R"SQL(
id::text, action, state, total, done, failed, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), error, company_id
)SQL";

// The batch's claim: the job's row, locked for the batch. A job another host is working
// right now is skipped, never waited for.
constexpr const char* kClaimSql = R"SQL(
SELECT id::text, company_id, action, filter::text, actor, reason, channel, until_at::text,
       (extract(epoch FROM cursor_occurred_at) * 1000000)::bigint, cursor_event_id::text, handler
FROM outbox_operation
WHERE state = 'running' AND ($1::uuid IS NULL OR id = $1::uuid)
ORDER BY updated_at
LIMIT 1
FOR UPDATE SKIP LOCKED
)SQL";

constexpr const char* kProgressSql = R"SQL(
UPDATE outbox_operation
SET done = done + $2, failed = failed + $3, updated_at = now(),
    cursor_occurred_at = timestamptz 'epoch' + $4::bigint * interval '1 microsecond', cursor_event_id = $5::uuid
WHERE id = $1::uuid
)SQL";

// A replay batch that waits for the previous ones' events: the job goes to the back of
// the runners' walk.
constexpr const char* kDeferSql = "UPDATE outbox_operation SET updated_at = now() WHERE id = $1::uuid";

// The event types a handler takes, as any registered host reports them.
constexpr const char* kHandlerTypesSql = R"SQL(
SELECT DISTINCT t FROM outbox_host o CROSS JOIN LATERAL jsonb_array_elements(o.handlers) h
CROSS JOIN LATERAL jsonb_array_elements_text(h.value -> 'event_types') t
WHERE h.value ->> 'handler' = $1 ORDER BY t
)SQL";

// Live hosts of a release that cannot run a replay (before V26): they would call the handler
// without telling it the delivery is a replay.
constexpr const char* kHostsBeforeReplaySql = R"SQL(
SELECT string_agg(host_id || ' (' || version || ')', ', ' ORDER BY host_id) FROM outbox_host h
WHERE stopped_at IS NULL AND last_heartbeat_at > now() - 3 * heartbeat_interval_ms * interval '1 millisecond'
  AND coalesce((to_jsonb(h) ->> 'schema_needed')::integer, 0) < 26
)SQL";

constexpr const char* kFinishSql = R"SQL(
UPDATE outbox_operation SET state = $2, error = $3, finished_at = now(), updated_at = now()
WHERE id = $1::uuid AND state = 'running'
)SQL";

bool is_time(const std::string& text) {
    static const std::regex pattern(
        "^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\\.[0-9]{1,9})?)?([Zz]|[+-][0-9]{2}(:?[0-9]{2})?)$");
    return std::regex_match(text, pattern);
}

std::optional<RetryRejected> validate_filter(const std::string& action, const OperationFilter& f) {
    if (!f.event_type && !f.last_error_code && !f.no_error_code && !f.status && !f.occurred_after &&
        !f.occurred_before && !f.aggregate_key && !f.handler) {
        return unprocessable("INVALID_FILTER", "the filter needs at least one of event_type, last_error_code, "
                                               "no_error_code, status, occurred_after, occurred_before, "
                                               "aggregate_key, handler");
    }
    if (f.no_error_code && f.last_error_code) {
        return unprocessable("INVALID_FILTER", "no_error_code and last_error_code exclude each other: send one of them");
    }
    if (f.event_type && !core::is_event_type(*f.event_type)) {
        return unprocessable("INVALID_FILTER", "event_type must be PascalCase letters and digits, e.g. MissionCompleted");
    }
    if (f.last_error_code && !core::is_error_code(*f.last_error_code)) {
        return unprocessable("INVALID_FILTER", "last_error_code must be an error code such as HTTP_503");
    }
    if (f.handler && !core::is_handler_name(*f.handler)) {
        return unprocessable("INVALID_FILTER", "handler must be 1 to 100 of a-z 0-9 . _ - starting with a letter or digit");
    }
    if (f.aggregate_key) {
        const auto length = utf8_length(*f.aggregate_key);
        if (!length || *length < 1 || *length > 200 || has_control_characters(*f.aggregate_key)) {
            return unprocessable("INVALID_FILTER", "aggregate_key must be 1 to 200 characters without control characters");
        }
    }
    if (f.occurred_after && !is_time(*f.occurred_after)) return bad_time("occurred_after");
    if (f.occurred_before && !is_time(*f.occurred_before)) return bad_time("occurred_before");
    if (operation_statuses(action, f.status).empty()) {
        const auto allowed = operation_statuses(action, std::nullopt);
        std::string names;
        for (const auto& s : allowed) names += (names.empty() ? "" : ", ") + s;
        return unprocessable("INVALID_STATUS", "status must be one of " + names + " for " + action);
    }
    return std::nullopt;
}

// The pattern passed; PostgreSQL still refuses impossible dates such as 2026-02-30, and an
// empty range is a mistake worth naming.
std::optional<RetryRejected> check_times(pqxx::work& tx, const OperationFilter& f) {
    const std::pair<const std::optional<std::string>&, const char*> times[] = {{f.occurred_after, "occurred_after"},
                                                                              {f.occurred_before, "occurred_before"}};
    for (const auto& [value, name] : times) {
        if (!value) continue;
        try {
            pqxx::subtransaction sub(tx, "time_check");
            sub.exec_params("SELECT $1::timestamptz", *value);
            sub.commit();
        } catch (const pqxx::data_exception&) {
            return bad_time(name);
        }
    }
    if (f.occurred_after && f.occurred_before &&
        !tx.exec_params1("SELECT $1::timestamptz < $2::timestamptz", *f.occurred_after, *f.occurred_before)[0].as<bool>()) {
        return unprocessable("INVALID_FILTER", "occurred_after must be earlier than occurred_before");
    }
    return std::nullopt;
}

json filter_json(const OperationFilter& f) {
    const auto opt = [](const std::optional<std::string>& v) { return v ? json(*v) : json(nullptr); };
    return json{{"event_type", opt(f.event_type)},         {"last_error_code", opt(f.last_error_code)},
                {"no_error_code", f.no_error_code},        {"status", opt(f.status)},
                {"occurred_after", opt(f.occurred_after)}, {"occurred_before", opt(f.occurred_before)},
                {"aggregate_key", opt(f.aggregate_key)},   {"handler", opt(f.handler)}};
}

OperationFilter filter_from_json(const json& j) {
    OperationFilter f;
    const auto opt = [&](const char* name) {
        const auto it = j.find(name);
        return it == j.end() || it->is_null() ? std::nullopt : std::optional<std::string>(it->get<std::string>());
    };
    f.event_type = opt("event_type");
    f.last_error_code = opt("last_error_code");
    f.no_error_code = j.value("no_error_code", false);
    f.status = opt("status");
    f.occurred_after = opt("occurred_after");
    f.occurred_before = opt("occurred_before");
    f.aggregate_key = opt("aggregate_key");
    f.handler = opt("handler");
    return f;
}

// The event types a job takes ($3 of the filter): the filter's type, or none (every type);
// a replay takes only the types its handler takes, narrowed by the filter's type.
std::optional<std::string> job_types(pqxx::work& tx, const OperationFilter& f,
                                     const std::optional<std::string>& replay_handler) {
    if (!replay_handler) {
        if (!f.event_type) return std::nullopt;
        return db::pg_array(std::vector<std::string>{*f.event_type});
    }
    std::vector<std::string> types;
    for (const auto& row : tx.exec_params(kHandlerTypesSql, *replay_handler)) {
        const auto type = row[0].as<std::string>();
        if (!f.event_type || *f.event_type == type) types.push_back(type);
    }
    return db::pg_array(types);
}

// The filter's parameters $1..$10 of db::event_sql::operation_filter, then `extra`.
template <class... Extra>
pqxx::result exec_filtered(pqxx::work& tx, const std::string& sql, const std::optional<std::string>& company,
                           const std::string& action, const OperationFilter& f, const std::optional<std::string>& types,
                           const std::optional<std::string>& until, Extra&&... extra) {
    return tx.exec_params(sql, company, db::pg_array(operation_statuses(action, f.status)), types,
                          f.last_error_code, f.no_error_code, f.occurred_after, f.occurred_before, f.aggregate_key,
                          f.handler, until, std::forward<Extra>(extra)...);
}

void set_limits(pqxx::work& tx) {
    tx.exec("SET LOCAL lock_timeout = '5s'");
    tx.exec("SET LOCAL statement_timeout = '30s'");
}

OperationPreview preview(pqxx::work& tx, const OperationRequest& request, const std::optional<std::string>& types) {
    OperationPreview answer;
    answer.count = exec_filtered(tx, db::event_sql::kOperationCount, request.company_id, request.action,
                                 request.filter, types, std::nullopt)[0][0]
                       .as<long long>();
    for (const auto& row : exec_filtered(tx, db::event_sql::kOperationSample, request.company_id, request.action,
                                         request.filter, types, std::nullopt, kOperationSample)) {
        answer.sample_event_ids.push_back(row[0].as<std::string>());
    }
    return answer;
}

// A replay needs a handler some registered host runs, and no live host of a release that
// would call it without saying the delivery is a replay.
std::optional<RetryRejected> check_replay(pqxx::work& tx, const std::string& handler) {
    if (tx.exec_params(kHandlerTypesSql, handler).empty()) {
        return unprocessable("UNKNOWN_HANDLER", "no registered host runs handler '" + handler +
                                                    "'; start a host with its plugin first (outboxd status lists them)");
    }
    const pqxx::row old = tx.exec1(kHostsBeforeReplaySql);
    if (!old[0].is_null()) {
        return unprocessable("HOSTS_TOO_OLD", "replay needs every live host at outboxd 0.3.0 or later; upgrade "
                                              "or stop these first: " + old[0].as<std::string>());
    }
    return std::nullopt;
}

OperationStartResult attempt_start(pqxx::connection& conn, const OperationRequest& request) {
    pqxx::work tx(conn);
    set_limits(tx);
    if (auto rejected = check_times(tx, request.filter)) return *rejected;
    const bool replay = request.action == "replay";
    const std::optional<std::string> types = job_types(tx, request.filter, replay ? request.handler : std::nullopt);
    if (replay) {
        if (auto rejected = check_replay(tx, *request.handler)) return *rejected;
    }
    if (request.dry_run) return preview(tx, request, types);

    const std::string company = request.company_id.value_or("");
    const pqxx::row hashes = tx.exec_params1(kHashSql, request.idempotency_key, canonical_operation_request(request));
    const std::string key_hash = hashes[0].as<std::string>();
    const std::string request_hash = hashes[1].as<std::string>();
    tx.exec_params(kOperationKeyLockSql, company, key_hash);
    const pqxx::result earlier = tx.exec_params(kFindSql, company, key_hash);
    if (!earlier.empty()) {
        if (earlier[0][1].as<std::string>() != request_hash) return key_reused();
        return OperationStarted{earlier[0][0].as<std::string>(), true};
    }

    // The job takes the events that occurred up to now: it ends under a steady stream of new ones.
    const std::string until = tx.exec1("SELECT now()::text")[0].as<std::string>();
    const long long total = exec_filtered(tx, db::event_sql::kOperationCount, request.company_id, request.action,
                                          request.filter, types, until)[0][0]
                                .as<long long>();
    const json filter = filter_json(request.filter);
    const std::string id = tx.exec_params1(kInsertSql, request.company_id, request.action, filter.dump(),
                                           request.handler, request.actor, request.reason, request.channel, key_hash,
                                           request_hash, total, until)[0]
                               .as<std::string>();
    json detail{{"operation_id", id}, {"action", request.action}, {"filter", filter},
                {"total", total},     {"channel", request.channel}};
    if (request.handler) detail["handler"] = *request.handler;
    tx.exec_params0(kOperationAuditSql, request.actor, "outbox.operation_start", request.company_id, id, detail.dump());
    tx.commit();
    return OperationStarted{id, false};
}

OperationStatus status_from(const pqxx::row& row) {
    OperationStatus s;
    s.operation_id = row[0].as<std::string>();
    s.action = row[1].as<std::string>();
    s.state = row[2].as<std::string>();
    s.total = row[3].as<long long>();
    s.done = row[4].as<long long>();
    s.failed = row[5].as<long long>();
    s.created_at = row[6].as<std::string>();
    if (!row[7].is_null()) s.finished_at = row[7].as<std::string>();
    if (!row[8].is_null()) s.error = row[8].as<std::string>();
    return s;
}

std::string select_status_sql(const char* lock) {
    return std::string("SELECT ") + kStatusColumns +
           " FROM outbox_operation WHERE id = $1::uuid AND ($2::text IS NULL OR company_id = $2) " + lock;
}

// The job's events of this batch: acted on when this transaction locked them.
struct BatchEvents {
    std::vector<std::string> ids;
    std::vector<std::string> attempts;
    std::vector<std::string> statuses;
    std::vector<std::string> versions;
    long long read = 0;
    long long last_micros = 0;
    std::string last_id;
};

BatchEvents read_batch(pqxx::work& tx, const pqxx::row& job, const OperationFilter& filter, int batch_size) {
    const std::optional<std::string> company =
        job[1].is_null() ? std::nullopt : std::optional<std::string>(job[1].as<std::string>());
    // As text: GCC 12 takes an optional<long long> argument for maybe-uninitialized.
    const std::optional<std::string> cursor =
        job[8].is_null() ? std::nullopt : std::optional<std::string>(job[8].as<std::string>());
    const std::optional<std::string> cursor_id =
        job[9].is_null() ? std::nullopt : std::optional<std::string>(job[9].as<std::string>());
    const std::optional<std::string> handler =
        job[10].is_null() ? std::nullopt : std::optional<std::string>(job[10].as<std::string>());
    const std::optional<std::string> types = job_types(tx, filter, handler);
    BatchEvents events;
    for (const auto& row : exec_filtered(tx, db::event_sql::kOperationBatch, company, job[2].as<std::string>(), filter,
                                         types, job[7].as<std::string>(), cursor, cursor_id, batch_size)) {
        ++events.read;
        events.last_id = row[0].as<std::string>();
        events.last_micros = row[1].as<long long>();
        if (!row[2].as<bool>()) continue;
        events.ids.push_back(events.last_id);
        events.statuses.push_back(row[3].as<std::string>());
        events.attempts.push_back(row[4].as<std::string>());
        events.versions.push_back(row[5].as<std::string>());
    }
    return events;
}

// Acts on the locked events; returns how many changed.
long long act(pqxx::work& tx, const pqxx::row& job, const BatchEvents& events) {
    if (events.ids.empty()) return 0;
    const std::string action = job[2].as<std::string>();
    const auto params = [&](auto&&... extra) {
        return std::make_tuple(db::pg_array(events.ids), db::pg_array(events.attempts), db::pg_array(events.statuses),
                               db::pg_array(events.versions), job[4].as<std::string>(), job[5].as<std::string>(),
                               job[0].as<std::string>(), job[6].as<std::string>(), extra...);
    };
    const auto run = [&](const std::string& sql, auto&& args) {
        return std::apply([&](auto&&... a) { return tx.exec_params1(sql, a...); }, args);
    };
    const pqxx::row result = action == "replay"    ? run(db::event_sql::kOperationReplay, params(job[10].as<std::string>()))
                             : action == "redrive" ? run(db::event_sql::kOperationRedrive, params())
                             : action == "discard" ? run(db::event_sql::kOperationDiscard, params())
                                                   : run(db::event_sql::kOperationCancel, params());
    // Delivered on commit: hosts handling these types claim the events at once.
    const std::string types = result[1].is_null() ? std::string() : result[1].as<std::string>();
    std::size_t start = 0;
    while (start < types.size()) {
        const auto comma = types.find(',', start);
        tx.exec_params(kNotifySql, types.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return result[0].as<long long>();
}

}  // namespace

std::vector<std::string> operation_statuses(const std::string& action, const std::optional<std::string>& status) {
    std::vector<std::string> allowed;
    if (action == "redrive") allowed = {"REVIEW_REQUIRED"};
    if (action == "discard") allowed = {"REVIEW_REQUIRED", "PENDING", "RETRY_WAIT"};
    if (action == "cancel") allowed = {"PENDING", "RETRY_WAIT"};
    if (action == "replay") allowed = {"COMPLETED", "DISCARDED"};
    if (!status) return allowed;
    for (const auto& s : allowed) {
        if (s == *status) return {s};
    }
    return {};
}

std::optional<RetryRejected> validate_operation_request(const OperationRequest& request) {
    if (request.action != "redrive" && request.action != "discard" && request.action != "cancel" &&
        request.action != "replay") {
        return unprocessable("INVALID_ACTION", "action must be redrive, discard, cancel or replay");
    }
    if (request.action == "replay") {
        if (!request.handler || !core::is_handler_name(*request.handler)) {
            return unprocessable("INVALID_HANDLER", "replay needs handler: the one handler to run again, 1 to 100 of "
                                                    "a-z 0-9 . _ - starting with a letter or digit");
        }
        if (request.filter.handler) {
            return unprocessable("INVALID_FILTER", "filter.handler selects events still waiting for a handler and "
                                                   "does not apply to a replay; name the handler to run in handler");
        }
    } else if (request.handler) {
        return unprocessable("INVALID_BODY", "handler is for replay only; to select events by handler use filter.handler");
    }
    if (!request.dry_run) {
        if (auto rejected = validate_idempotency_key(request.idempotency_key)) return rejected;
    }
    if (auto rejected = validate_filter(request.action, request.filter)) return rejected;
    return validate_reason(request.reason);
}

std::string canonical_operation_request(const OperationRequest& request) {
    return json{{"action", request.action},
                {"filter", filter_json(request.filter)},
                {"handler", request.handler ? json(*request.handler) : json(nullptr)},
                {"reason", request.reason}}
        .dump();
}

OperationStartResult start_operation(pqxx::connection& conn, const OperationRequest& request) {
    if (auto rejected = validate_operation_request(request)) return *rejected;
    return db::perform([&] { return attempt_start(conn, request); }, db::kOperatorTransaction);
}

std::optional<OperationStatus> read_operation(pqxx::connection& conn, const std::string& operation_id,
                                              const std::optional<std::string>& company_id) {
    pqxx::read_transaction tx(conn);
    tx.exec("SET LOCAL statement_timeout = '5s'");
    const pqxx::result r = tx.exec_params(select_status_sql(""), operation_id, company_id);
    if (r.empty()) return std::nullopt;
    return status_from(r[0]);
}

json to_json(const OperationStatus& s) {
    return json{{"operation_id", s.operation_id}, {"action", s.action},
                {"state", s.state},               {"total", s.total},
                {"done", s.done},                 {"failed", s.failed},
                {"created_at", s.created_at},     {"finished_at", s.finished_at ? json(*s.finished_at) : json(nullptr)}};
}

std::vector<OperationStatus> list_operations(pqxx::connection& conn, const std::optional<std::string>& company_id,
                                             const std::optional<std::string>& state, int limit) {
    pqxx::read_transaction tx(conn);
    tx.exec("SET LOCAL statement_timeout = '5s'");
    // Jobs are operators' decisions, a few a day: a scan of the table stays small.
    const pqxx::result rows = tx.exec_params(
        std::string("SELECT ") + kStatusColumns +
            " FROM outbox_operation WHERE ($1::text IS NULL OR company_id = $1) AND ($2::text IS NULL OR state = $2)"
            " ORDER BY created_at DESC, id LIMIT $3",
        company_id, state, std::clamp(limit, 1, kMaxOperationList));
    std::vector<OperationStatus> jobs;
    jobs.reserve(rows.size());
    for (const auto& row : rows) jobs.push_back(status_from(row));
    return jobs;
}

std::optional<OperationCancelled> cancel_operation(pqxx::connection& conn, const std::string& operation_id,
                                                   const std::optional<std::string>& company_id,
                                                   const std::string& actor, const std::string& channel) {
    return db::perform(
        [&]() -> std::optional<OperationCancelled> {
            pqxx::work tx(conn);
            set_limits(tx);
            // Waits for a batch in flight: its events stay acted on, no later batch starts.
            const pqxx::result r = tx.exec_params(select_status_sql("FOR UPDATE"), operation_id, company_id);
            if (r.empty()) return std::nullopt;
            OperationCancelled answer{status_from(r[0]), false};
            if (answer.status.state != "running") return answer;
            tx.exec_params0(kFinishSql, operation_id, "cancelled", std::optional<std::string>());
            const json detail{{"operation_id", operation_id}, {"done", answer.status.done},
                              {"failed", answer.status.failed}, {"channel", channel}};
            const std::optional<std::string> company =
                r[0][9].is_null() ? std::nullopt : std::optional<std::string>(r[0][9].as<std::string>());
            tx.exec_params0(kOperationAuditSql, actor, "outbox.operation_cancel", company, operation_id, detail.dump());
            answer.status = status_from(tx.exec_params1(select_status_sql(""), operation_id, company_id));
            answer.changed = true;
            tx.commit();
            return answer;
        },
        db::kOperatorTransaction);
}

static OperationBatch work_batch(pqxx::connection& conn, int batch_size, const std::optional<std::string>& operation_id,
                          std::string& claimed_id) {
    pqxx::work tx(conn);
    set_limits(tx);
    // A host that stops answering mid-batch is cut off by the server, which frees the job.
    tx.exec("SET LOCAL idle_in_transaction_session_timeout = '60s'");
    tx.exec("SET LOCAL synchronous_commit = on");
    const pqxx::result claimed = tx.exec_params(kClaimSql, operation_id);
    if (claimed.empty()) return {};
    const pqxx::row job = claimed[0];
    OperationBatch batch{true, job[0].as<std::string>()};
    claimed_id = batch.operation_id;
    // A replay goes at the pace its handler finishes: no batch while a batch's worth of
    // replayed events still waits, so new work never queues behind a whole replay.
    if (job[2].as<std::string>() == "replay" &&
        tx.exec_params1(db::event_sql::kReplaysInFlight, job[10].as<std::string>(), batch_size)[0].as<bool>()) {
        tx.exec_params0(kDeferSql, batch.operation_id);
        tx.commit();
        batch.worked = false;
        batch.deferred = true;
        return batch;
    }
    const OperationFilter filter = filter_from_json(json::parse(job[3].as<std::string>()));
    const BatchEvents events = read_batch(tx, job, filter, batch_size);
    batch.read = events.read;
    if (events.read == 0) {
        tx.exec_params0(kFinishSql, batch.operation_id, "done", std::optional<std::string>());
        batch.finished = true;
    } else {
        batch.acted = act(tx, job, events);
        tx.exec_params0(kProgressSql, batch.operation_id, batch.acted, events.read - batch.acted, events.last_micros,
                        events.last_id);
    }
    tx.commit();
    return batch;
}

OperationBatch work_operation_batch(pqxx::connection& conn, int batch_size, const std::optional<std::string>& operation_id) {
    std::string claimed_id;
    try {
        return work_batch(conn, batch_size, operation_id, claimed_id);
    } catch (...) {
        // The batch rolled back. A statement that fails on its own (not a lost connection, a
        // timeout or a conflict, which the next batch retries) would fail every batch again.
        const db::DbFailure failure = db::classify_db_error(std::current_exception());
        if (claimed_id.empty() || failure.kind != db::DbFailureKind::Sql) throw;
        fail_operation(conn, claimed_id, "a batch failed: " + failure.describe());
        return OperationBatch{true, claimed_id, 0, 0, true, true};
    }
}

void fail_operation(pqxx::connection& conn, const std::string& operation_id, const std::string& error) {
    pqxx::work tx(conn);
    set_limits(tx);
    tx.exec_params0(kFinishSql, operation_id, "failed", error.substr(0, 300));
    tx.commit();
}

}  // namespace outbox::operations
