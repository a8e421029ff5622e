#pragma once

#include <string>
#include <utility>

#include <pqxx/connection>
#include <pqxx/except>
#include <pqxx/nontransaction>

#include "db/connect.hpp"
#include "db/db_session.hpp"

namespace outbox::db {

/// Declares `sql` as the named prepared statement `name` on `conn`, once per connection;
/// behind a transaction-mode pooler it declares nothing (see exec_statement).
inline void prepare_statement(pqxx::connection& conn, const std::string& name, const std::string& sql) {
    if (connection_settings().transaction_pooled) return;
    try {
        conn.prepare(name, sql);
    } catch (const pqxx::usage_error&) {
        // already prepared on this connection
    }
}

/// kSessionSettings and the statement timeout as SET LOCAL statements.
inline std::string local_settings_sql(const ConnectionSettings& settings) {
    std::string sql;
    const std::string session = kSessionSettings;
    for (std::size_t at = 0; at < session.size();) {
        const auto next = session.find("SET ", at + 1);
        const std::string one = session.substr(at, next == std::string::npos ? std::string::npos : next - at);
        sql += "SET LOCAL " + one.substr(4);
        at = next == std::string::npos ? session.size() : next;
    }
    return sql + "; " + statement_timeout_sql(settings, "SET LOCAL");
}

namespace detail {

/// `sql` (prepared as `name` on a session of its own) in a transaction of its own, after
/// `prelude` (may be empty); behind a transaction-mode pooler with the session settings as
/// SET LOCAL and the statement unnamed.
template <class... Args>
pqxx::result exec_in_transaction(pqxx::connection& conn, const std::string& prelude, const std::string& name,
                                 const std::string& sql, Args&&... args) {
    const ConnectionSettings settings = connection_settings();
    pqxx::nontransaction tx(conn);
    try {
        // Inside the try: a BEGIN whose settings or prelude failed leaves an aborted transaction
        // that must be rolled back before the pooler may hand the server connection to anyone.
        std::string begin = "BEGIN";
        if (settings.transaction_pooled) begin += "; " + local_settings_sql(settings);
        if (!prelude.empty()) begin += "; " + prelude;
        tx.exec(begin);
        pqxx::result rows = settings.transaction_pooled ? tx.exec_params(sql, std::forward<Args>(args)...)
                                                        : tx.exec_prepared(name, std::forward<Args>(args)...);
        tx.exec("COMMIT");
        return rows;
    } catch (...) {
        try {
            tx.exec("ROLLBACK");
        } catch (...) {
            // A broken connection ended the transaction with it; it is dropped anyway.
        }
        throw;
    }
}

}  // namespace detail

/// Runs the bookkeeping statement `name` (text `sql`) on its own. On a session of its own it
/// is the named prepared statement (parsed and planned once per connection) in autocommit.
/// Behind a transaction-mode pooler, where consecutive statements may run on different server
/// connections, it is an unnamed statement with the same text inside one transaction that
/// carries the session settings a direct DbSession sets once (SET LOCAL ends with it): three
/// round trips instead of one, and no server connection is left with state of ours.
template <class... Args>
pqxx::result exec_statement(pqxx::connection& conn, const std::string& name, const std::string& sql, Args&&... args) {
    if (connection_settings().transaction_pooled) {
        return detail::exec_in_transaction(conn, std::string(), name, sql, std::forward<Args>(args)...);
    }
    return pqxx::nontransaction(conn).exec_prepared(name, std::forward<Args>(args)...);
}

/// exec_statement inside a transaction that first runs `prelude` (a lock the statement's
/// snapshot must come after); an empty prelude: exec_statement.
template <class... Args>
pqxx::result exec_statement_after(pqxx::connection& conn, const std::string& prelude, const std::string& name,
                                  const std::string& sql, Args&&... args) {
    if (prelude.empty()) return exec_statement(conn, name, sql, std::forward<Args>(args)...);
    return detail::exec_in_transaction(conn, prelude, name, sql, std::forward<Args>(args)...);
}

}  // namespace outbox::db
