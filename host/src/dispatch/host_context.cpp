#include "dispatch/host_context.hpp"

#include <pqxx/pqxx>

#include "db/db_error.hpp"
#include "log/log.hpp"

namespace outbox::dispatch {
namespace {
constexpr const char* kStalePlan = "0A000";
}  // namespace

HostDb::~HostDb() { rollback(); }

sdk::Rows HostDb::exec(std::string_view sql, const sdk::Params& params) {
    if (failure_) {
        // The transaction is already aborted; repeat the first failure.
        if (failure_->first) throw sdk::RetryableError(failure_->second, "database transaction already failed");
        throw sdk::NonRetryableError(failure_->second, "database transaction already failed");
    }
    try {
        if (!tx_) {
            conn_.emplace(pool_.acquire());
            tx_ = std::make_unique<pqxx::nontransaction>(**conn_);
            tx_->exec0("BEGIN");
        }
        std::vector<const char*> values;
        values.reserve(params.size());
        for (const auto& param : params) values.push_back(param ? param->c_str() : nullptr);
        const std::optional<std::string> statement = (*conn_).prepared(sql);
        prepared_sql_ = statement ? std::optional<std::string>(sql) : std::nullopt;
        const pqxx::result result =
            statement ? tx_->exec_prepared(*statement, pqxx::prepare::make_dynamic_params(values))
                      : tx_->exec_params(std::string(sql), pqxx::prepare::make_dynamic_params(values));
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
        const db::DbFailure failure = db::classify_db_error(std::current_exception());
        switch (failure.kind) {
            case db::DbFailureKind::ConnectionBroken:
            case db::DbFailureKind::InDoubt: failure_.emplace(true, "DB_UNAVAILABLE"); break;
            case db::DbFailureKind::Conflict: failure_.emplace(true, "DB_CONFLICT"); break;
            case db::DbFailureKind::Sql:
                if (failure.sqlstate == kStalePlan && prepared_sql_) {
                    // "cached plan must not change result type": the handler's table changed
                    // under a prepared statement. The next attempt prepares it afresh.
                    (*conn_).forget(*prepared_sql_);
                    failure_.emplace(true, "DB_" + failure.sqlstate);
                    break;
                }
                failure_.emplace(false, "DB_" + (failure.sqlstate.empty() ? std::string("ERROR") : failure.sqlstate));
                break;
            case db::DbFailureKind::Other: failure_.emplace(false, "DB_ERROR"); break;
        }
        if (failure_->first) throw sdk::RetryableError(failure_->second, "database statement failed");
        throw sdk::NonRetryableError(failure_->second, "database statement failed");
    }
}

void HostDb::commit_with(const std::string& last_statement) {
    tx_->exec(last_statement + "; COMMIT");
    tx_.reset();
    conn_.reset();
}

void HostDb::rollback() noexcept {
    if (tx_) {
        try {
            tx_->exec0("ROLLBACK");
        } catch (...) {
            if (conn_) conn_->discard();
        }
        tx_.reset();
    }
    conn_.reset();
}

void HostDb::discard() noexcept {
    tx_.reset();
    if (conn_) conn_->discard();
    conn_.reset();
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
