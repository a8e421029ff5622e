#include "db/db_error.hpp"

#include <pqxx/except>

#include "db/connection_pool.hpp"

namespace outbox::db {

DbFailure classify_db_error(const std::exception_ptr& error) noexcept {
    try {
        std::rethrow_exception(error);
    } catch (const pqxx::in_doubt_error&) {
        return {DbFailureKind::InDoubt, {}};
    } catch (const pqxx::broken_connection&) {
        return {DbFailureKind::ConnectionBroken, {}};
    } catch (const pqxx::statement_completion_unknown&) {
        return {DbFailureKind::InDoubt, {}};
    } catch (const pqxx::serialization_failure&) {
        return {DbFailureKind::Conflict, "40001"};
    } catch (const pqxx::deadlock_detected&) {
        return {DbFailureKind::Conflict, "40P01"};
    } catch (const pqxx::transaction_rollback&) {
        return {DbFailureKind::Conflict, "40000"};
    } catch (const pqxx::sql_error& e) {
        const std::string state = e.sqlstate();
        if (state == "57014") return {DbFailureKind::Timeout, state};  // statement timeout (or a cancel)
        // Class 57 (operator intervention: admin shutdown, crash shutdown) and 08
        // (connection exception) mean the server went away mid-statement.
        if (state.rfind("57", 0) == 0 || state.rfind("08", 0) == 0) return {DbFailureKind::ConnectionBroken, state};
        return {DbFailureKind::Sql, state};
    } catch (const PoolTimeout&) {
        return {DbFailureKind::Timeout, {}};
    } catch (...) {
        return {DbFailureKind::Other, {}};
    }
}

std::string DbFailure::describe() const {
    switch (kind) {
        case DbFailureKind::ConnectionBroken:
            if (!note.empty()) return "connection lost (" + note + ")";
            return "connection lost" + (sqlstate.empty() ? "" : " (SQLSTATE " + sqlstate + ")");
        case DbFailureKind::Conflict: return "serialization conflict (SQLSTATE " + sqlstate + ")";
        case DbFailureKind::InDoubt: return "commit outcome unknown";
        case DbFailureKind::Timeout:
            return sqlstate.empty() ? std::string("no pooled connection free in time") : "statement timeout (SQLSTATE " + sqlstate + ")";
        case DbFailureKind::Sql: return "SQL error (SQLSTATE " + (sqlstate.empty() ? std::string("?") : sqlstate) + ")";
        case DbFailureKind::Other: return "unexpected error";
    }
    return "unexpected error";
}

}  // namespace outbox::db
