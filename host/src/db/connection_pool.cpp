#include "db/connection_pool.hpp"

#include <pqxx/except>

namespace outbox::db {

std::unique_ptr<pqxx::connection> open_connection(const std::string& url) {
    auto conn = std::make_unique<pqxx::connection>(url);
    return conn;
}

ConnectionPool::ConnectionPool(std::string url, int size) : url_(std::move(url)), size_(size < 1 ? 1 : size) {}

ConnectionPool::Handle ConnectionPool::acquire() {
    std::unique_ptr<pqxx::connection> conn;
    {
        std::unique_lock lock(mutex_);
        available_.wait(lock, [&] { return in_use_ < size_; });
        ++in_use_;
        if (!idle_.empty()) {
            conn = std::move(idle_.back());
            idle_.pop_back();
        }
    }
    if (conn && conn->is_open()) return Handle(this, std::move(conn));
    try {
        return Handle(this, open_connection(url_));
    } catch (...) {
        give_back(nullptr);
        throw;
    }
}

void ConnectionPool::give_back(std::unique_ptr<pqxx::connection> conn) noexcept {
    {
        std::lock_guard lock(mutex_);
        --in_use_;
        if (conn && conn->is_open()) idle_.push_back(std::move(conn));
    }
    available_.notify_one();
}

ConnectionPool::Handle::~Handle() {
    if (pool_ != nullptr) pool_->give_back(std::move(conn_));
}

}  // namespace outbox::db
