#pragma once

#include <exception>
#include <string>
#include <utility>

namespace outbox::db {

/// The one place that classifies database exceptions (following pqxx::perform).
enum class DbFailureKind {
    ConnectionBroken,  // reconnect with backoff; the unit of work may be retried
    Conflict,          // serialization failure or deadlock: retry the unit of work
    InDoubt,           // commit outcome unknown: never replay, re-read instead
    Timeout,           // a statement or pool timeout: the server is up, the work took too long
    Sql,               // the statement itself is wrong or violates a constraint
    Other,             // not a database error
};

struct DbFailure {
    DbFailure(DbFailureKind failure_kind = DbFailureKind::Other, std::string state = {}, std::string host_note = {})
        : kind(failure_kind), sqlstate(std::move(state)), note(std::move(host_note)) {}

    DbFailureKind kind;
    std::string sqlstate;  // five characters for Sql/Conflict when known
    std::string note;      // the host's own finding, e.g. which of its timeouts fired
    /// A short, safe description for logs: the kind and SQLSTATE, never statement text or values.
    [[nodiscard]] std::string describe() const;
};

/// Classifies `error`. In libpqxx 6.4 transaction_rollback is not an sql_error, so the
/// order of checks matters.
DbFailure classify_db_error(const std::exception_ptr& error) noexcept;

}  // namespace outbox::db
