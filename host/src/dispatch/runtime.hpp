#pragma once

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "db/connection_pool.hpp"
#include "db/outage_log.hpp"
#include "dispatch/completer.hpp"
#include "dispatch/db_session.hpp"
#include "dispatch/fleet_limiter.hpp"
#include "dispatch/handler_set.hpp"
#include "dispatch/in_flight.hpp"
#include "dispatch/runtime_options.hpp"
#include "dispatch/work_queue.hpp"
#include "metrics/metrics.hpp"

namespace outbox::dispatch {

/// The worker side of one host: scheduler, workers, completer, heartbeat, rescuer and the
/// NOTIFY listener, each on its own thread with its own connection (handlers share a pool
/// sized by database.pool_size).
class Runtime {
public:
    Runtime(RuntimeOptions options, std::shared_ptr<const HandlerSet> handlers, metrics::Metrics& metrics);
    ~Runtime();
    Runtime(const Runtime&) = delete;
    Runtime& operator=(const Runtime&) = delete;

    void start();

    /// Graceful stop: stop claiming, give back claimed events no worker started, let
    /// running handlers finish within shutdown_timeout (then cancel them through
    /// ctx.cancelled()), store every outcome, stop the heartbeat. Returns false when some
    /// handler call never returned; its lease then expires and the event is retried.
    bool stop();

    /// Routes new claims to `handlers` from now on; events already claimed finish with the
    /// handlers they were claimed for (their plugins stay loaded until then).
    void set_handlers(std::shared_ptr<const HandlerSet> handlers);
    [[nodiscard]] std::shared_ptr<const HandlerSet> handlers() const { return handlers_.get(); }
    [[nodiscard]] const CurrentHandlers& current_handlers() const noexcept { return handlers_; }
    /// The host's one outage log: other components report through it too, so an outage is
    /// one line however many threads notice it.
    [[nodiscard]] db::OutageLog& outage() noexcept { return outage_; }

    [[nodiscard]] const RuntimeOptions& options() const noexcept { return options_; }
    [[nodiscard]] std::size_t in_flight() const { return in_flight_.size(); }

private:
    void release_unstarted(std::vector<Work> unstarted);

    RuntimeOptions options_;
    CurrentHandlers handlers_;
    metrics::Metrics& metrics_;
    db::OutageLog outage_;
    db::ConnectionPool pool_;
    InFlightTable in_flight_;
    WorkQueue queue_;
    Wakeup wakeup_;
    Completer completer_;
    FleetLimiter limiter_;
    std::atomic<bool> stopping_{false};
    std::atomic<bool> hard_stop_{false};

    std::jthread scheduler_;
    std::jthread listener_;
    std::jthread rescuer_;
    std::jthread heartbeat_;
    std::jthread completer_thread_;
    std::vector<std::thread> workers_;
    bool started_ = false;
    bool stopped_ = false;
};

}  // namespace outbox::dispatch
