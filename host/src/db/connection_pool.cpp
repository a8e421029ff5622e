#include "db/connection_pool.hpp"

#include <sys/socket.h>

#include <pqxx/except>

namespace outbox::db {

ConnectionPool::ConnectionPool(std::string url, int size) : url_(std::move(url)), size_(size < 1 ? 1 : size) {}

ConnectionPool::Handle ConnectionPool::acquire(std::chrono::steady_clock::time_point deadline, std::stop_token stop) {
    std::unique_ptr<Pooled> conn;
    {
        std::unique_lock lock(mutex_);
        const auto free = [&] { return in_use_ < size_; };
        const bool got = deadline == std::chrono::steady_clock::time_point::max()
                             ? available_.wait(lock, stop, free)
                             : available_.wait_until(lock, stop, deadline, free);
        if (!got) throw PoolTimeout();
        ++in_use_;
        if (!idle_.empty()) {
            conn = std::move(idle_.back());
            idle_.pop_back();
        }
    }
    if (conn && conn->conn->is_open()) return Handle(this, std::move(conn));
    try {
        auto fresh = std::make_unique<Pooled>();
        fresh->conn = open_connection(url_);
        return Handle(this, std::move(fresh));
    } catch (...) {
        give_back(nullptr);
        throw;
    }
}

void ConnectionPool::give_back(std::unique_ptr<Pooled> conn) noexcept {
    {
        std::lock_guard lock(mutex_);
        --in_use_;
        if (conn && conn->conn->is_open()) idle_.push_back(std::move(conn));
    }
    available_.notify_one();
}

ConnectionPool::Handle::~Handle() {
    if (pool_ != nullptr && !forfeited_) pool_->give_back(std::move(conn_));
}

void ConnectionPool::Handle::forfeit() noexcept {
    if (forfeited_.exchange(true)) return;
    if (conn_ && conn_->conn && conn_->conn->sock() >= 0) ::shutdown(conn_->conn->sock(), SHUT_RDWR);
    if (pool_ != nullptr) pool_->give_back(nullptr);
}

std::optional<std::string> ConnectionPool::Handle::prepared(std::string_view sql) {
    // Behind a transaction-mode pooler the next transaction may run on a server connection
    // that never saw the definition: every statement goes unnamed.
    if (connection_settings().transaction_pooled) return std::nullopt;
    const std::string text(sql);
    if (const auto found = conn_->statements.find(text); found != conn_->statements.end()) return found->second;
    if (conn_->statements.size() >= kMaxPreparedStatements) return std::nullopt;
    std::string name = "outbox_handler_" + std::to_string(conn_->next_name++);
    // libpqxx sends the definition with the first execution.
    conn_->conn->prepare(name, text);
    conn_->statements.emplace(text, name);
    return name;
}

void ConnectionPool::Handle::forget(std::string_view sql) noexcept {
    const auto found = conn_->statements.find(std::string(sql));
    if (found == conn_->statements.end()) return;
    try {
        conn_->conn->unprepare(found->second);
    } catch (...) {
        // Deallocating on a broken connection fails; the connection is dropped anyway.
    }
    conn_->statements.erase(found);
}

}  // namespace outbox::db
