#include "lease/lease_store.hpp"

#include <cstdint>
#include <cstdio>
#include <algorithm>
#include <map>
#include <random>
#include <set>

#include <pqxx/pqxx>

#include "db/event_sql.hpp"
#include "db/pg_array.hpp"
#include "db/statement.hpp"

namespace outbox::lease {
namespace {

void prepare_once(pqxx::connection& conn) {
    db::prepare_statement(conn, "outbox_claim_fair", db::event_sql::kClaimFair);
    db::prepare_statement(conn, "outbox_claim_suspect", db::event_sql::kClaimSuspect);
    db::prepare_statement(conn, "outbox_finish", db::event_sql::kFinish);
    db::prepare_statement(conn, "outbox_extend", db::event_sql::kExtend);
    db::prepare_statement(conn, "outbox_release", db::event_sql::kRelease);
    db::prepare_statement(conn, "outbox_release_untracked", db::event_sql::kReleaseUntracked);
    db::prepare_statement(conn, "outbox_rescue", db::event_sql::kRescue);
    db::prepare_statement(conn, "outbox_park", db::event_sql::kPark);
    db::prepare_statement(conn, "outbox_release_parked", db::event_sql::kReleaseParked);
}

std::vector<std::string> split_names(const pqxx::field& field) {
    std::vector<std::string> names;
    if (field.is_null()) return names;
    const std::string text = field.c_str();
    std::size_t start = 0;
    while (start <= text.size()) {
        const auto comma = text.find(',', start);
        names.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return names;
}

}  // namespace

std::string new_incarnation() {
    std::random_device random;
    std::uniform_int_distribution<std::uint64_t> digits;
    char text[17];
    std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(digits(random)));
    return text;
}

// Every method is a single statement, which PostgreSQL runs atomically on its own; running
// it without BEGIN/COMMIT saves two round trips per claim, finish and heartbeat.
LeaseStore::LeaseStore(pqxx::connection& conn) : conn_(conn) { prepare_once(conn_); }

bool TenantShares::capped() const {
    return default_cap > 0 || std::any_of(caps.begin(), caps.end(), [](int cap) { return cap > 0; });
}

TenantShares tenant_shares_of(const std::map<std::string, int>& weights, const std::map<std::string, int>& caps,
                              int default_cap) {
    TenantShares shares;
    shares.default_cap = default_cap;
    std::set<std::string> companies;
    for (const auto& [company, weight] : weights) companies.insert(company);
    for (const auto& [company, cap] : caps) companies.insert(company);
    for (const auto& company : companies) {
        const auto weight = weights.find(company);
        const auto cap = caps.find(company);
        shares.companies.push_back(company);
        shares.weights.push_back(weight == weights.end() ? 1 : weight->second);
        shares.caps.push_back(cap == caps.end() ? 0 : cap->second);
    }
    return shares;
}

std::vector<ClaimedEvent> LeaseStore::claim(const std::vector<std::string>& event_types, int limit,
                                            const LeaseOwner& owner, std::chrono::milliseconds lease,
                                            ClaimKind kind, const TenantShares* tenants, FairCursor* cursor) {
    std::vector<ClaimedEvent> claimed;
    if (event_types.empty() || limit <= 0) return claimed;
    const bool suspect = kind == ClaimKind::Suspect;
    static const TenantShares kEqual;
    const TenantShares& shares = tenants != nullptr ? *tenants : kEqual;
    const std::string after = cursor != nullptr ? cursor->after : std::string();
    pqxx::result rows;
    if (suspect) {
        rows = db::exec_statement(conn_, "outbox_claim_suspect", db::event_sql::kClaimSuspect, db::pg_array(event_types),
                                  1, owner.host_id, static_cast<long long>(lease.count()), owner.incarnation, time_);
    } else {
        // A cap is kept across the fleet by counting the company's PROCESSING events: claimers
        // take turns under one transaction-scoped lock, and the claim's snapshot, taken after
        // it, sees every earlier claim.
        const bool capped = shares.capped();
        rows = db::exec_statement_after(conn_, capped ? db::event_sql::kTenantCapLock : std::string(),
                                        "outbox_claim_fair", db::event_sql::kClaimFair, db::pg_array(event_types),
                                        limit, owner.host_id, static_cast<long long>(lease.count()),
                                        owner.incarnation, time_, after, db::pg_array(shares.companies),
                                        db::pg_array(shares.weights), db::pg_array(shares.caps), shares.default_cap,
                                        capped);
    }
    claimed.reserve(rows.size());
    std::map<std::string, std::pair<int, int>> taken;  // company: (events, room)
    int last_visit = 0;
    std::string reached;
    for (const auto& row : rows) {
        ClaimedEvent item;
        item.event.id = row[0].c_str();
        item.event.type = row[1].c_str();
        item.event.company_id = row[2].c_str();
        item.event.aggregate_key = row[3].c_str();
        item.event.payload_json = row[4].c_str();
        item.event.attempt = row[5].as<int>();
        item.lease_token = row[6].c_str();
        item.event.occurred_at = std::chrono::system_clock::time_point{std::chrono::microseconds{row[7].as<long long>()}};
        item.consumed_by = split_names(row[8]);
        item.trace.traceparent = row[9].c_str();
        item.trace.tracestate = row[10].c_str();
        item.replay_handler = row[11].c_str();
        if (!suspect) {
            const int visit = row[12].as<int>();
            auto& [count, room] = taken[item.event.company_id];
            ++count;
            room = row[13].as<int>();
            if (visit > last_visit) {
                last_visit = visit;
                reached = item.event.company_id;
            }
        }
        claimed.push_back(std::move(item));
    }
    if (cursor != nullptr && !suspect) {
        // Full when the limit was reached, or a company took all its room: more may be due.
        cursor->more_due = static_cast<int>(claimed.size()) >= limit ||
                           std::any_of(taken.begin(), taken.end(), [](const auto& entry) {
                               return entry.second.first >= entry.second.second;
                           });
        if (!reached.empty()) cursor->after = reached;
    }
    return claimed;
}

AttemptHistory attempt_history_of(const std::string& setting) {
    if (setting == "off") return AttemptHistory::Off;
    if (setting == "failures") return AttemptHistory::Failures;
    return AttemptHistory::All;
}

namespace {
std::string epoch_micros(std::chrono::system_clock::time_point at) {
    return std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(at.time_since_epoch()).count());
}
}  // namespace

std::vector<std::string> LeaseStore::finish(const std::vector<Finish>& batch, const std::string& host) {
    std::vector<std::string> ids, tokens, statuses, delays, consumed_ids, consumed_names;
    std::vector<std::string> call_ids, call_handlers, call_started, call_ended, call_outcomes;
    std::vector<std::optional<std::string>> codes, call_codes;
    const auto now = std::chrono::system_clock::now();
    for (const auto& item : batch) {
        ids.push_back(item.lease.event_id);
        tokens.push_back(item.lease.lease_token);
        statuses.emplace_back(core::to_text(item.transition.status));
        long long delay_ms = 0;
        if (item.transition.next_attempt_at) {
            delay_ms = std::max<long long>(
                0, std::chrono::duration_cast<std::chrono::milliseconds>(*item.transition.next_attempt_at - now).count());
        }
        delays.push_back(std::to_string(delay_ms));
        codes.push_back(item.transition.error_code.empty() ? std::nullopt
                                                           : std::optional<std::string>(item.transition.error_code));
        for (const auto& handler : item.consumed_by) {
            consumed_ids.push_back(item.lease.event_id);
            consumed_names.push_back(handler);
        }
        if (host.empty()) continue;
        for (const auto& call : item.calls) {
            call_ids.push_back(item.lease.event_id);
            call_handlers.push_back(call.handler);
            call_started.push_back(epoch_micros(call.started));
            call_ended.push_back(epoch_micros(call.ended));
            call_outcomes.push_back(call.outcome);
            call_codes.push_back(call.error_code.empty() ? std::nullopt : std::optional<std::string>(call.error_code));
        }
    }
    const pqxx::result rows =
        db::exec_statement(conn_, "outbox_finish", db::event_sql::kFinish, db::pg_array(ids), db::pg_array(tokens),
                           db::pg_array(statuses), db::pg_array(delays), db::pg_array(codes), db::pg_array(consumed_ids),
                           db::pg_array(consumed_names), time_, db::pg_array(call_ids), db::pg_array(call_handlers),
                           db::pg_array(call_started), db::pg_array(call_ended), db::pg_array(call_outcomes),
                           db::pg_array(call_codes), host);
    std::vector<std::string> applied;
    applied.reserve(rows.size());
    for (const auto& row : rows) applied.emplace_back(row[0].c_str());
    return applied;
}

std::vector<std::string> LeaseStore::extend(const std::vector<LeaseRef>& leases, std::chrono::milliseconds lease) {
    std::vector<std::string> ids, tokens;
    for (const auto& ref : leases) {
        ids.push_back(ref.event_id);
        tokens.push_back(ref.lease_token);
    }
    const pqxx::result rows =
        db::exec_statement(conn_, "outbox_extend", db::event_sql::kExtend, db::pg_array(ids), db::pg_array(tokens),
                           static_cast<long long>(lease.count()), time_);
    std::vector<std::string> kept;
    for (const auto& row : rows) kept.emplace_back(row[0].c_str());
    return kept;
}

int LeaseStore::release(const std::vector<LeaseRef>& leases) {
    if (leases.empty()) return 0;
    std::vector<std::string> ids, tokens;
    for (const auto& ref : leases) {
        ids.push_back(ref.event_id);
        tokens.push_back(ref.lease_token);
    }
    const pqxx::result rows = db::exec_statement(conn_, "outbox_release", db::event_sql::kRelease, db::pg_array(ids),
                                                 db::pg_array(tokens), time_);
    return static_cast<int>(rows.affected_rows());
}

int LeaseStore::release_untracked(const LeaseOwner& owner, const std::string& since,
                                  const std::vector<std::string>& tracked_tokens) {
    const pqxx::result rows = db::exec_statement(conn_, "outbox_release_untracked", db::event_sql::kReleaseUntracked,
                                                 owner.host_id, since, db::pg_array(tracked_tokens), owner.incarnation, time_);
    return static_cast<int>(rows.affected_rows());
}

std::string LeaseStore::server_time() {
    return pqxx::nontransaction(conn_).exec("SELECT now()::text")[0][0].c_str();
}

int LeaseStore::rescue_expired(int max_attempts, int limit, bool record) {
    const pqxx::result rows =
        db::exec_statement(conn_, "outbox_rescue", db::event_sql::kRescue, max_attempts, limit, time_, record);
    return rows[0][0].as<int>();
}

ParkPass LeaseStore::park_blocked(int window, std::chrono::milliseconds min_wait) {
    const pqxx::result rows = db::exec_statement(conn_, "outbox_park", db::event_sql::kPark, window,
                                                 static_cast<long long>(min_wait.count()), time_);
    return {rows[0][0].as<int>(), rows[0][1].as<int>()};
}

int LeaseStore::release_parked(int aggregates_per_statement) {
    std::string company;
    std::string key;
    int released = 0;
    for (;;) {
        const pqxx::result rows = db::exec_statement(conn_, "outbox_release_parked", db::event_sql::kReleaseParked,
                                                     company, key, aggregates_per_statement);
        released += rows[0][3].as<int>();
        if (rows[0][0].as<int>() < aggregates_per_statement) return released;
        company = rows[0][1].as<std::string>();
        key = rows[0][2].as<std::string>();
    }
}

std::string attempt_insert_statement(pqxx::connection_base& conn, const sdk::Event& event, const std::string& host,
                                     const std::vector<AttemptCall>& calls) {
    std::string sql =
        "INSERT INTO outbox_attempt (event_id, company_id, attempt, handler, host, started_at, ended_at, outcome, "
        "error_code) VALUES ";
    for (std::size_t i = 0; i < calls.size(); ++i) {
        const AttemptCall& call = calls[i];
        sql += i == 0 ? "('" : ", ('";
        sql += conn.esc(event.id) + "'::uuid, '" + conn.esc(event.company_id) + "', " + std::to_string(event.attempt);
        sql += ", '" + conn.esc(call.handler) + "', '" + conn.esc(host) + "', pg_catalog.to_timestamp(";
        sql += epoch_micros(call.started) + " / 1e6), pg_catalog.to_timestamp(" + epoch_micros(call.ended) + " / 1e6), '";
        sql += conn.esc(call.outcome) + "', ";
        sql += call.error_code.empty() ? std::string("NULL)") : "'" + conn.esc(call.error_code) + "')";
    }
    return sql;
}

std::string fence_statement(pqxx::connection_base& conn, const LeaseRef& lease,
                            const std::vector<std::string>& handler_names, bool complete) {
    // Literals, not parameters: the statement travels with the COMMIT in one simple query.
    std::string sql = "SELECT outbox_fence('";
    sql += conn.esc(lease.event_id);
    sql += "'::uuid, '";
    sql += conn.esc(lease.lease_token);
    sql += "'::uuid, '";
    sql += conn.esc(db::pg_array(handler_names));
    sql += complete ? "'::text[], true)" : "'::text[], false)";
    return sql;
}

}  // namespace outbox::lease
