#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <pqxx/nontransaction>

#include "db/connection_pool.hpp"
#include "dispatch/in_flight.hpp"
#include "outbox/sdk/context.hpp"
#include "outbox/sdk/errors.hpp"

namespace outbox::dispatch {

/// The transaction of a commit group (handlers.<name>.commit_group). Its members' HostDb
/// work in savepoints of it, one member after another on the worker's thread; the group
/// commits it once (Worker::close_group). The mutex is held for every round trip, so the
/// host can commit it from another thread when a member's call is abandoned.
struct GroupTx {
    std::mutex mutex;
    std::optional<db::ConnectionPool::Handle> conn;
    std::unique_ptr<pqxx::nontransaction> tx;            // set from BEGIN until closed
    std::optional<std::string> open_savepoint;           // the running member's, while it has one
    int savepoints = 0;                                  // taken so far, for unique names
    std::chrono::steady_clock::time_point began{};       // when BEGIN was sent
    bool broken = false;  // a round trip failed on the connection: nothing of it will commit
    bool closed = false;  // committed or given up: no member may use it any more
};

/// The handler's lazily opened transaction. Database errors become SDK exceptions with safe
/// codes, and the first one is remembered: a handler that swallows it and returns normally
/// still fails with that code instead of committing half its work.
class HostDb final : public sdk::Db {
public:
    /// Statements run under a statement timeout of the time left until `deadline`; none
    /// starts after it (they fail at once with the retryable code HANDLER_TIMEOUT).
    /// Nor after `cancel` turned true (the lease is lost or the host stops).
    /// The open transaction's connection is registered with `flight`, so an abandoned
    /// call's session can be ended by the host.
    /// With `group`, the work goes into a savepoint of the group's transaction instead:
    /// rollback() rolls back to it, commit_with() releases it, and the group commits.
    HostDb(db::ConnectionPool& pool, std::chrono::steady_clock::time_point deadline, InFlight& flight,
           const std::atomic<bool>& hard_stop, GroupTx* group = nullptr)
        : pool_(pool), deadline_(deadline), flight_(flight), lease_lost_(flight.lost), hard_stop_(hard_stop),
          group_(group) {}
    ~HostDb() override;
    HostDb(const HostDb&) = delete;
    HostDb& operator=(const HostDb&) = delete;

    sdk::Rows exec(std::string_view sql, const sdk::Params& params) override;

    [[nodiscard]] bool opened() const noexcept { return group_ != nullptr ? savepoint_.has_value() : tx_ != nullptr; }
    /// Runs `last_statement` and COMMIT (in a group: RELEASE SAVEPOINT) in one round trip;
    /// only when opened(). Throws what libpqxx throws: then the outcome of the commit may be
    /// unknown (see discard()).
    void commit_with(const std::string& last_statement);
    /// The connection of the open transaction; only when opened().
    [[nodiscard]] db::ConnectionPool::Handle& connection() noexcept { return group_ != nullptr ? *group_->conn : *conn_; }
    /// The first failure of exec(), if any: (retryable?, code).
    [[nodiscard]] const std::optional<std::pair<bool, std::string>>& failure() const noexcept { return failure_; }
    /// Rolls back and gives the connection back (dropping it if it is broken).
    void rollback() noexcept;
    /// Drops the connection (after a commit whose outcome is unknown).
    void discard() noexcept;

private:
    [[noreturn]] void fail(bool retryable, std::string code);
    /// Gives the connection back (or drops it), unregistered from the flight first.
    void release_connection(bool drop) noexcept;
    void limit_statement_time();
    /// The first statement of a group member: BEGIN if the group has none yet, SAVEPOINT.
    void open_savepoint(const std::string& limit);
    void rollback_savepoint() noexcept;
    [[nodiscard]] pqxx::nontransaction& tx() noexcept { return group_ != nullptr ? *group_->tx : *tx_; }

    db::ConnectionPool& pool_;
    const std::chrono::steady_clock::time_point deadline_;
    InFlight& flight_;
    const std::atomic<bool>& lease_lost_;
    const std::atomic<bool>& hard_stop_;
    std::chrono::steady_clock::time_point limit_set_at_{};  // when statement_timeout was last set
    long long limit_ms_ = 0;                                  // the statement_timeout set then
    std::optional<db::ConnectionPool::Handle> conn_;
    // BEGIN and COMMIT are sent by hand so that the COMMIT can share a round trip with the
    // lease fence; libpqxx's transaction classes send each on its own.
    std::unique_ptr<pqxx::nontransaction> tx_;
    std::optional<std::pair<bool, std::string>> failure_;
    std::optional<std::string> prepared_sql_;  // the statement being run, when prepared
    GroupTx* group_ = nullptr;                 // the commit group's transaction, if any
    std::optional<std::string> savepoint_;     // this member's savepoint in it, once taken
};

/// What a handler sees during one call.
class HostContext final : public sdk::Context {
public:
    HostContext(HostDb& db, const std::atomic<bool>& lease_lost, const std::atomic<bool>& hard_stop,
                std::chrono::steady_clock::time_point deadline, const std::string& config_json, std::string event_id,
                std::string event_type, std::string handler, int attempt, const sdk::TraceContext& trace,
                bool replay)
        : db_(db), lease_lost_(lease_lost), hard_stop_(hard_stop), deadline_(deadline), config_json_(config_json),
          event_id_(std::move(event_id)), event_type_(std::move(event_type)), handler_(std::move(handler)),
          attempt_(attempt), trace_(trace), replay_(replay) {}

    sdk::Db& db() override { return db_; }
    [[nodiscard]] bool cancelled() const override {
        return lease_lost_ || hard_stop_ || std::chrono::steady_clock::now() >= deadline_;
    }
    [[nodiscard]] std::chrono::steady_clock::time_point deadline() const override { return deadline_; }
    [[nodiscard]] const std::string& config_json() const override { return config_json_; }
    void log(sdk::LogLevel level, std::string_view message) override;
    [[nodiscard]] const sdk::TraceContext& trace() const override { return trace_; }
    [[nodiscard]] bool replay() const override { return replay_; }

private:
    HostDb& db_;
    const std::atomic<bool>& lease_lost_;
    const std::atomic<bool>& hard_stop_;
    std::chrono::steady_clock::time_point deadline_;
    const std::string& config_json_;
    std::string event_id_;
    std::string event_type_;
    std::string handler_;
    int attempt_;
    const sdk::TraceContext& trace_;  // the call's (telemetry::CallTrace), which outlives it
    bool replay_;
};

}  // namespace outbox::dispatch
