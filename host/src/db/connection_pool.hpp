#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <stop_token>

#include <pqxx/connection>

#include "db/connect.hpp"

namespace outbox::db {

/// No pool slot became free before the caller's deadline (or its stop was requested).
class PoolTimeout : public std::runtime_error {
public:
    PoolTimeout() : std::runtime_error("no database connection became free in time") {}
};

/// A fixed-size pool of connections, sized independently of handler concurrency. Connections
/// are opened lazily and replaced when found broken. Thread-safe.
class ConnectionPool {
    struct Pooled;

public:
    /// How many distinct statements of handler code one connection keeps prepared; a handler
    /// that builds SQL text per event must not grow every server process without bound.
    static constexpr std::size_t kMaxPreparedStatements = 100;

    class Handle {
    public:
        Handle(ConnectionPool* pool, std::unique_ptr<Pooled> conn) noexcept : pool_(pool), conn_(std::move(conn)) {}
        ~Handle();
        // The moved-from handle must not give its slot back a second time.
        Handle(Handle&& other) noexcept
            : pool_(std::exchange(other.pool_, nullptr)), conn_(std::move(other.conn_)),
              forfeited_(other.forfeited_.load()) {}
        Handle& operator=(Handle&&) = delete;
        Handle(const Handle&) = delete;
        Handle& operator=(const Handle&) = delete;

        pqxx::connection& operator*() const noexcept { return *conn_->conn; }
        pqxx::connection* operator->() const noexcept { return conn_->conn.get(); }
        /// Drops the connection instead of returning it (after a failure left it in doubt).
        void discard() noexcept { conn_.reset(); }

        /// The name under which `sql` is prepared on this connection (declared on first use;
        /// PostgreSQL parses and plans it once per connection instead of once per call), or
        /// nothing once the connection holds kMaxPreparedStatements others.
        std::optional<std::string> prepared(std::string_view sql);
        /// Forgets a statement prepared through prepared() (its cached plan went stale).
        void forget(std::string_view sql) noexcept;
        /// From another thread, while the owner may be blocked on the connection (an
        /// abandoned handler call): shuts its socket down, so the server ends the session
        /// and its transaction's locks, and gives the slot back now. The owner's later
        /// destruction then gives nothing back.
        void forfeit() noexcept;

    private:
        ConnectionPool* pool_;
        std::unique_ptr<Pooled> conn_;
        std::atomic<bool> forfeited_{false};
    };

    ConnectionPool(std::string url, int size);
    ConnectionPool(const ConnectionPool&) = delete;
    ConnectionPool& operator=(const ConnectionPool&) = delete;

    /// Waits for a free slot until `deadline` or a stop request (then throws PoolTimeout) and
    /// returns an open connection. Throws pqxx::broken_connection when a new connection
    /// cannot be opened (the slot is given back).
    Handle acquire(std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max(),
                   std::stop_token stop = {});

    [[nodiscard]] const std::string& url() const noexcept { return url_; }

private:
    struct Pooled {
        std::unique_ptr<pqxx::connection> conn;
        std::unordered_map<std::string, std::string> statements;  // SQL text -> prepared name
        std::size_t next_name = 0;
    };

    void give_back(std::unique_ptr<Pooled> conn) noexcept;

    std::string url_;
    int size_;
    std::mutex mutex_;
    std::condition_variable_any available_;
    std::vector<std::unique_ptr<Pooled>> idle_;
    int in_use_ = 0;
};

}  // namespace outbox::db
