#pragma once

#include <chrono>
#include <memory>
#include <optional>

#include <pqxx/connection>

#include "admin/admin_server.hpp"
#include "admin/authentication.hpp"
#include "admin/company_slots.hpp"
#include "admin/error_mapping.hpp"
#include "db/connection_pool.hpp"
#include "db/db_error.hpp"
#include "db/perform.hpp"

namespace outbox::admin {

/// What every endpoint group shares: the options, the host's metrics and handlers, the
/// authenticator and the admin database pool.
class AdminContext {
public:
    AdminContext(AdminOptions options, metrics::Metrics& metrics, AdminServer::HandlerSource handlers);

    [[nodiscard]] const AdminOptions& options() const noexcept { return options_; }
    /// The host's counters: read by /metrics, counted into by the discard endpoint.
    [[nodiscard]] metrics::Metrics& metrics() const noexcept { return metrics_; }
    [[nodiscard]] const Authenticator& auth() const noexcept { return auth_; }
    /// The handlers the host routes to now (never null).
    [[nodiscard]] std::shared_ptr<const routing::HandlerSet> handlers() const;

    /// Runs `work` on a pooled connection. A pooled connection the server closed while it
    /// was idle is replaced and the work retried (safe: nothing was committed on it);
    /// failing to open a connection at all is not retried, so an outage answers at once.
    /// `bound`: how long one call may take before the host drops its connection (default
    /// database.call_timeout); probes pass a short one.
    template <class Work>
    std::optional<db::DbFailure> try_database(Work&& work, std::optional<std::chrono::milliseconds> bound = std::nullopt) {
        return run(pool_, std::forward<Work>(work), bound);
    }

    /// try_database on the probes' own connections (/readyz, /metrics): API requests that
    /// hold every API connection never delay them.
    template <class Work>
    std::optional<db::DbFailure> try_probe_database(Work&& work, std::chrono::milliseconds bound) {
        return run(probe_pool_, std::forward<Work>(work), bound);
    }

    /// try_database for an API request of `principal`: on failure answers the mapped 5xx and
    /// returns false. While the principal's company already runs
    /// admin.db_connections_per_company calls, answers 503 BUSY at once instead.
    template <class Work>
    bool with_database(const Principal& principal, HttpResponse& res, Work&& work) {
        const auto slot = slots_.try_take({auth_.is_platform_role(principal.role), principal.company_id});
        if (!slot) {
            send_company_busy(res);
            return false;
        }
        const auto failure = try_database(std::forward<Work>(work));
        if (!failure) return true;
        send_db_failure(res, *failure);
        return false;
    }

private:
    void send_company_busy(HttpResponse& res) const;

    // An admin request waits this long for a pooled connection, then answers 503 BUSY.
    static constexpr auto kPoolWait = std::chrono::seconds{2};

    // Three runs; again only when a pooled connection broke (the server closed it while it
    // was idle), never when none could be opened.
    template <class Work>
    std::optional<db::DbFailure> run(db::ConnectionPool& pool, Work&& work, std::optional<std::chrono::milliseconds> bound) {
        bool opened = false;
        const db::RetryPolicy policy{3, [&opened](const db::DbFailure& failure) {
                                         return opened && failure.kind == db::DbFailureKind::ConnectionBroken;
                                     }};
        try {
            db::perform(
                [&] {
                    opened = false;
                    db::ConnectionPool::Handle conn = pool.acquire(std::chrono::steady_clock::now() + kPoolWait);
                    opened = true;
                    try {
                        db::CallGuard guard(*conn, std::chrono::steady_clock::now() +
                                                       bound.value_or(db::connection_settings().call_timeout));
                        work(*conn);
                    } catch (...) {
                        conn.discard();
                        throw;
                    }
                },
                policy);
            return std::nullopt;
        } catch (...) {
            return db::classify_db_error(std::current_exception());
        }
    }

    AdminOptions options_;
    metrics::Metrics& metrics_;
    AdminServer::HandlerSource handler_source_;
    Authenticator auth_;
    CompanySlots slots_;
    db::ConnectionPool pool_;
    db::ConnectionPool probe_pool_;
};

}  // namespace outbox::admin
