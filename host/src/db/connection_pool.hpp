#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <pqxx/connection>

namespace outbox::db {

/// Opens a connection. Throws pqxx::broken_connection when the server cannot be reached.
std::unique_ptr<pqxx::connection> open_connection(const std::string& url);

/// A fixed-size pool of connections, sized independently of handler concurrency. Connections
/// are opened lazily and replaced when found broken. Thread-safe.
class ConnectionPool {
public:
    class Handle {
    public:
        Handle(ConnectionPool* pool, std::unique_ptr<pqxx::connection> conn) noexcept
            : pool_(pool), conn_(std::move(conn)) {}
        ~Handle();
        Handle(Handle&& other) noexcept = default;
        Handle& operator=(Handle&&) = delete;
        Handle(const Handle&) = delete;
        Handle& operator=(const Handle&) = delete;

        pqxx::connection& operator*() const noexcept { return *conn_; }
        pqxx::connection* operator->() const noexcept { return conn_.get(); }
        /// Drops the connection instead of returning it (after a failure left it in doubt).
        void discard() noexcept { conn_.reset(); }

    private:
        ConnectionPool* pool_;
        std::unique_ptr<pqxx::connection> conn_;
    };

    ConnectionPool(std::string url, int size);
    ConnectionPool(const ConnectionPool&) = delete;
    ConnectionPool& operator=(const ConnectionPool&) = delete;

    /// Waits for a free slot and returns an open connection. Throws pqxx::broken_connection
    /// when a new connection cannot be opened (the slot is given back).
    Handle acquire();

    [[nodiscard]] const std::string& url() const noexcept { return url_; }

private:
    void give_back(std::unique_ptr<pqxx::connection> conn) noexcept;

    std::string url_;
    int size_;
    std::mutex mutex_;
    std::condition_variable available_;
    std::vector<std::unique_ptr<pqxx::connection>> idle_;
    int in_use_ = 0;
};

}  // namespace outbox::db
