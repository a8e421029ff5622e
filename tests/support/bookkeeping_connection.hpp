#pragma once

#include <memory>
#include <string>

#include <pqxx/pqxx>

#include "db/db_session.hpp"

namespace outbox::test {

/// A connection set up as the host's bookkeeping sessions are (db::kSessionSettings), for
/// tests that run the lease statements or read their plans.
inline std::unique_ptr<pqxx::connection> bookkeeping_connection(const std::string& url) {
    auto conn = std::make_unique<pqxx::connection>(url);
    pqxx::nontransaction(*conn).exec(db::kSessionSettings);
    return conn;
}

}  // namespace outbox::test
