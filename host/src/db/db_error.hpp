#pragma once

#include <exception>
#include <string>

namespace outbox::db {

/// The one place that classifies database exceptions (following pqxx::perform).
enum class DbFailureKind {
    ConnectionBroken,  // reconnect with backoff; the unit of work may be retried
    Conflict,          // serialization failure or deadlock: retry the unit of work
    InDoubt,           // commit outcome unknown: never replay, re-read instead
    Sql,               // the statement itself is wrong or violates a constraint
    Other,             // not a database error
};

struct DbFailure {
    DbFailureKind kind = DbFailureKind::Other;
    std::string sqlstate;  // five characters for Sql/Conflict when known
    /// A short, safe description for logs: the kind and SQLSTATE, never statement text or values.
    [[nodiscard]] std::string describe() const;
};

/// Classifies `error`. In libpqxx 6.4 transaction_rollback is not an sql_error, so the
/// order of checks matters.
DbFailure classify_db_error(const std::exception_ptr& error) noexcept;

}  // namespace outbox::db
