#include "dispatch/host_context.hpp"

#include <pqxx/pqxx>

#include "db/db_error.hpp"
#include "log/log.hpp"

namespace outbox::dispatch {
namespace {
constexpr const char* kStalePlan = "0A000";
constexpr auto kGuardMargin = std::chrono::seconds{2};
}  // namespace

HostDb::~HostDb() { rollback(); }

void HostDb::fail(bool retryable, std::string code) {
    failure_.emplace(retryable, std::move(code));
    if (retryable) throw sdk::RetryableError(failure_->second, "database statement failed");
    throw sdk::NonRetryableError(failure_->second, "database statement failed");
}

// The server ends a statement at the handler's deadline. statement_timeout is a duration
// per statement, so a limit set at time t lets a statement starting later overshoot the
// deadline by (now - t). SET LOCAL costs a round trip: it is sent with BEGIN and again only
// once that overshoot would exceed a second; the host's CallGuard bounds the rest.
void HostDb::limit_statement_time() {
    const auto now = std::chrono::steady_clock::now();
    if (opened() && now - limit_set_at_ <= std::chrono::seconds{1}) return;
    // Also under the host's guard (call_timeout), so the server, not the guard, ends a slow
    // statement and the connection survives.
    const auto left = std::min<long long>(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - now).count(),
        db::connection_settings().call_timeout.count() * 3 / 4);
    limit_ms_ = std::max<long long>(1, left);
    const std::string limit = "SET LOCAL statement_timeout = " + std::to_string(limit_ms_);
    if (group_ != nullptr && !savepoint_) {
        open_savepoint(limit);
    } else if (!tx_ && group_ == nullptr) {
        tx_ = std::make_unique<pqxx::nontransaction>(**conn_);
        tx_->exec0("BEGIN; " + limit);
    } else {
        tx().exec0(limit);
    }
    limit_set_at_ = now;
}

// The savepoint is named before it is sent: if the round trip fails half-way, the rollback
// to a savepoint that may not exist fails and marks the group broken, which is the safe side.
void HostDb::open_savepoint(const std::string& limit) {
    std::string sql;
    if (!group_->tx) {
        group_->tx = std::make_unique<pqxx::nontransaction>(**group_->conn);
        group_->began = std::chrono::steady_clock::now();
        sql = "BEGIN; ";
    }
    savepoint_ = "outbox_event_" + std::to_string(++group_->savepoints);
    group_->open_savepoint = savepoint_;
    // SET LOCAL inside the savepoint: rolled back with it, kept when it is released.
    group_->tx->exec0(sql + "SAVEPOINT " + *savepoint_ + "; " + limit);
}

void HostDb::rollback_savepoint() noexcept {
    if (!savepoint_) return;
    std::lock_guard lock(group_->mutex);
    if (!group_->closed && !group_->broken) {
        try {
            db::CallGuard guard(**group_->conn);
            group_->tx->exec0("ROLLBACK TO SAVEPOINT " + *savepoint_ + "; RELEASE SAVEPOINT " + *savepoint_);
        } catch (...) {
            group_->broken = true;
        }
    }
    if (!group_->closed) group_->open_savepoint.reset();
    savepoint_.reset();
}

sdk::Rows HostDb::exec(std::string_view sql, const sdk::Params& params) {
    if (failure_) {
        // The transaction is already aborted; repeat the first failure.
        if (failure_->first) throw sdk::RetryableError(failure_->second, "database transaction already failed");
        throw sdk::NonRetryableError(failure_->second, "database transaction already failed");
    }
    if (std::chrono::steady_clock::now() >= deadline_) fail(true, "HANDLER_TIMEOUT");
    if (lease_lost_ || hard_stop_) fail(true, "CANCELLED");
    // A group member holds its group's lock for the round trip: an abandonment commits the
    // group from another thread, never in the middle of a statement.
    std::unique_lock<std::mutex> group_lock;
    if (group_ != nullptr) {
        group_lock = std::unique_lock(group_->mutex);
        if (group_->closed) fail(true, "CANCELLED");
        if (group_->broken) fail(true, "DB_UNAVAILABLE");
    }
    std::optional<db::ConnectionPool::Handle>& conn = group_ != nullptr ? group_->conn : conn_;
    bool unanswered = false;
    try {
        if (!conn) {
            conn.emplace(pool_.acquire(
                std::min(deadline_, std::chrono::steady_clock::now() + db::connection_settings().call_timeout)));
            if (group_ == nullptr) flight_.attach_connection(&*conn_);
        }
        // A silent server cannot hold the handler past its deadline (the guard ends the call
        // a little after the server-side statement timeout should have) nor longer than any
        // other database call (database.call_timeout), so a stop never waits on it for long.
        db::CallGuard guard(**conn, std::min(deadline_ + kGuardMargin,
                                              std::chrono::steady_clock::now() + db::connection_settings().call_timeout));
        try {
            limit_statement_time();
            std::vector<const char*> values;
            values.reserve(params.size());
            for (const auto& param : params) values.push_back(param ? param->c_str() : nullptr);
            const std::optional<std::string> statement = (*conn).prepared(sql);
            prepared_sql_ = statement ? std::optional<std::string>(sql) : std::nullopt;
            const pqxx::result result =
                statement ? tx().exec_prepared(*statement, pqxx::prepare::make_dynamic_params(values))
                          : tx().exec_params(std::string(sql), pqxx::prepare::make_dynamic_params(values));
            sdk::Rows rows;
            rows.reserve(result.size());
            for (const auto& row : result) {
                sdk::Row out;
                out.reserve(row.size());
                for (const auto& field : row) {
                    out.push_back(field.is_null() ? std::nullopt : std::optional<std::string>(field.c_str()));
                }
                rows.push_back(std::move(out));
            }
            return rows;
        } catch (...) {
            unanswered = guard.fired();
            throw;
        }
    } catch (...) {
        const db::DbFailure failure = db::classify_db_error(std::current_exception());
        if (group_ != nullptr && (unanswered || failure.kind == db::DbFailureKind::ConnectionBroken ||
                                  failure.kind == db::DbFailureKind::InDoubt)) {
            group_->broken = true;  // the whole group's transaction is gone with the connection
        }
        if (unanswered) fail(true, "HANDLER_TIMEOUT");
        switch (failure.kind) {
            case db::DbFailureKind::ConnectionBroken:
            case db::DbFailureKind::InDoubt: fail(true, "DB_UNAVAILABLE");
            case db::DbFailureKind::Conflict: fail(true, "DB_CONFLICT");
            case db::DbFailureKind::Timeout: fail(true, "HANDLER_TIMEOUT");
            case db::DbFailureKind::Sql:
                if (failure.sqlstate == kStalePlan && prepared_sql_) {
                    // "cached plan must not change result type": the handler's table changed
                    // under a prepared statement. The next attempt prepares it afresh.
                    (*conn).forget(*prepared_sql_);
                    fail(true, "DB_" + failure.sqlstate);
                }
                fail(false, "DB_" + (failure.sqlstate.empty() ? std::string("ERROR") : failure.sqlstate));
            case db::DbFailureKind::Other: fail(false, "DB_ERROR");
        }
        fail(false, "DB_ERROR");
    }
}

void HostDb::commit_with(const std::string& last_statement) {
    std::unique_lock<std::mutex> group_lock;
    if (group_ != nullptr) {
        group_lock = std::unique_lock(group_->mutex);
        if (group_->closed || group_->broken) throw pqxx::broken_connection("the commit group's transaction is gone");
    }
    {
        db::CallGuard guard(*connection());
        // statement_timeout is a duration per statement: the fence gets the one in force
        // unless the handler's deadline had made it shorter than the bookkeeping limit.
        const long long fence_limit = db::connection_settings().call_timeout.count() * 3 / 4;
        std::string sql;
        if (limit_ms_ < fence_limit) sql = "SET LOCAL statement_timeout = " + std::to_string(fence_limit) + "; ";
        sql += last_statement;
        // In a group the fence ends the member's savepoint; the group commits them all.
        sql += group_ != nullptr ? "; RELEASE SAVEPOINT " + *savepoint_ : std::string("; COMMIT");
        try {
            tx().exec(sql);
        } catch (...) {
            if (group_ != nullptr) {
                const db::DbFailureKind kind = db::classify_db_error(std::current_exception()).kind;
                if (guard.fired() || kind == db::DbFailureKind::ConnectionBroken || kind == db::DbFailureKind::InDoubt) {
                    group_->broken = true;
                }
            }
            throw;
        }
    }
    if (group_ != nullptr) {
        savepoint_.reset();
        group_->open_savepoint.reset();
        return;
    }
    tx_.reset();
    release_connection(false);
}

void HostDb::release_connection(bool drop) noexcept {
    if (!conn_) return;
    flight_.detach_connection();
    if (drop) conn_->discard();
    conn_.reset();
}

void HostDb::rollback() noexcept {
    if (group_ != nullptr) {
        rollback_savepoint();
        return;
    }
    bool drop = false;
    if (tx_) {
        try {
            db::CallGuard guard(**conn_);
            tx_->exec0("ROLLBACK");
        } catch (...) {
            drop = true;
        }
        tx_.reset();
    }
    release_connection(drop);
}

void HostDb::discard() noexcept {
    if (group_ != nullptr) {
        std::lock_guard lock(group_->mutex);
        group_->broken = true;
        if (!group_->closed) group_->open_savepoint.reset();
        savepoint_.reset();
        return;
    }
    tx_.reset();
    release_connection(true);
}

void HostContext::log(sdk::LogLevel level, std::string_view message) {
    const log::Fields fields{event_id_, event_type_, handler_, attempt_, {}, {}};
    const std::string line = "plugin: " + std::string(message.substr(0, 500));
    switch (level) {
        case sdk::LogLevel::Debug: log::write(spdlog::level::debug, line, fields); break;
        case sdk::LogLevel::Info: log::write(spdlog::level::info, line, fields); break;
        case sdk::LogLevel::Warn: log::write(spdlog::level::warn, line, fields); break;
        case sdk::LogLevel::Error: log::write(spdlog::level::err, line, fields); break;
    }
}

}  // namespace outbox::dispatch
