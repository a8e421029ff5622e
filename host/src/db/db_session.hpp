#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>

#include <pqxx/connection>
#include <pqxx/nontransaction>

#include "db/connect.hpp"
#include "db/db_error.hpp"
#include "db/outage_log.hpp"
#include "db/perform.hpp"
#include "log/log.hpp"

namespace outbox::db {

/// Sleeps until `delay` passed or `stop` was requested; returns false when stopped.
inline bool sleep_for(std::chrono::milliseconds delay, std::stop_token stop) {
    std::mutex mutex;
    std::condition_variable_any cv;
    std::unique_lock lock(mutex);
    return !cv.wait_for(lock, stop, delay, [] { return false; }) && !stop.stop_requested();
}

/// Settings of every bookkeeping session: a queue table's statistics are stale by design,
/// so its statements plan through indexes (docs/design.md, "Bookkeeping sessions plan
/// through indexes").
inline constexpr const char* kSessionSettings =
    "SET synchronous_commit = off; SET enable_seqscan = off; SET enable_bitmapscan = off";

/// `<verb> statement_timeout = ...`: ¾ of database.call_timeout.
inline std::string statement_timeout_sql(const ConnectionSettings& settings, const std::string& verb) {
    return verb + " statement_timeout = " + std::to_string(settings.call_timeout.count() * 3 / 4);
}

/// A background component's own connection: opened on demand, dropped when broken, and
/// re-opened with backoff; it commits asynchronously (why that is safe: docs/design.md,
/// "Bookkeeping sessions"). Failures are reported once per outage through the OutageLog.
class DbSession {
public:
    DbSession(std::string url, std::string component, OutageLog& outage)
        : url_(std::move(url)), component_(std::move(component)), outage_(outage) {}

    /// Runs `work(connection)` under one host-kept deadline of `bound` (database.call_timeout
    /// when not given). Returns true when it succeeded; false after a failure (then it has
    /// already waited its backoff, unless stopped).
    template <class Work>
    bool run(Work&& work, std::stop_token stop, std::optional<std::chrono::milliseconds> bound = std::nullopt) {
        bool reused = false;
        bool unanswered = false;
        int runs = 0;
        // A connection left idle across a server restart breaks on first use once the server
        // is back: not an outage. The work runs again at once on a new connection (so at most
        // once); only that run's failure counts.
        const RetryPolicy bookkeeping{2, [&](const DbFailure& failure) {
                                          return failure.kind == DbFailureKind::ConnectionBroken && reused && !unanswered;
                                      }};
        try {
            perform(
                [&] {
                    if (runs++ > 0) conn_.reset();
                    reused = conn_ && conn_->is_open();
                    unanswered = false;
                    run_once(work, bound, unanswered);
                },
                bookkeeping);
            outage_.succeeded(connected_at_);
            backoff_.reset();
            return true;
        } catch (...) {
            back_off(classify_db_error(std::current_exception()), unanswered, stop);
            return false;
        }
    }

private:
    /// One run of `work` on the session's connection (opened first when there is none).
    template <class Work>
    void run_once(Work& work, std::optional<std::chrono::milliseconds> bound, bool& unanswered) {
        const ConnectionSettings settings = connection_settings();
        if (!conn_ || !conn_->is_open()) {
            connected_at_ = std::chrono::steady_clock::now();
            conn_ = open_connection(url_);
            // Behind a transaction-mode pooler a session SET would stick to whichever server
            // connection ran it: the lease statements set them per transaction instead
            // (exec_statement).
            if (!settings.transaction_pooled) {
                CallGuard guard(*conn_);
                // The server gives up on a statement before the host's own guard fires, so a
                // slow statement is reported as a timeout and keeps its connection.
                pqxx::nontransaction(*conn_).exec(std::string(kSessionSettings) + "; " +
                                                  statement_timeout_sql(settings, "SET"));
            }
        }
        CallGuard guard(*conn_, std::chrono::steady_clock::now() + bound.value_or(settings.call_timeout));
        try {
            work(*conn_);
        } catch (...) {
            unanswered = guard.fired();
            throw;
        }
    }

    /// What a failed unit of work leaves behind: the connection dropped when it cannot be
    /// trusted, the outage reported once, and the backoff waited (unless stopped); a
    /// conflict is retried by the caller at once.
    void back_off(const DbFailure& failure, bool unanswered, std::stop_token stop) {
        if (unanswered) {
            // The server (or something in between) stopped answering: an outage, and a new
            // connection is not tried at once.
            conn_.reset();
            outage_.failed(component_, DbFailure{DbFailureKind::ConnectionBroken, {}, "no answer within database.call_timeout"});
        } else if (failure.kind == DbFailureKind::Timeout) {
            log::warn(component_ + ": " + failure.describe() + "; retrying");
        } else if (failure.kind == DbFailureKind::ConnectionBroken || failure.kind == DbFailureKind::InDoubt) {
            conn_.reset();
            outage_.failed(component_, failure);
        } else if (failure.kind == DbFailureKind::Conflict) {
            return;  // retry the unit of work at once
        } else {
            // An SQL error here is a bug or a schema problem; say so, then back off.
            log::error(component_ + " failed: " + failure.describe());
            conn_.reset();
        }
        sleep_for(backoff_.next(), stop);
    }

    std::string url_;
    std::string component_;
    OutageLog& outage_;
    std::unique_ptr<pqxx::connection> conn_;
    std::chrono::steady_clock::time_point connected_at_{};
    ReconnectBackoff backoff_;
};

/// A level-triggered wake-up: notify() makes the next (or current) wait return at once.
class Wakeup {
public:
    void notify() {
        {
            std::lock_guard lock(mutex_);
            pending_ = true;
        }
        cv_.notify_all();
    }
    /// Waits up to `timeout`; returns true when woken by notify().
    bool wait_for(std::chrono::milliseconds timeout, std::stop_token stop) {
        std::unique_lock lock(mutex_);
        const bool woken = cv_.wait_for(lock, stop, timeout, [&] { return pending_; });
        pending_ = false;
        return woken;
    }

private:
    std::mutex mutex_;
    std::condition_variable_any cv_;
    bool pending_ = false;
};

}  // namespace outbox::db
