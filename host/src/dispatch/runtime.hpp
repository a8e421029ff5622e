#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <thread>
#include <vector>

#include "core/retry_policy.hpp"
#include "db/connection_pool.hpp"
#include "db/db_session.hpp"
#include "db/outage_log.hpp"
#include "dispatch/circuit_breaker.hpp"
#include "dispatch/completer.hpp"
#include "dispatch/fleet_limiter.hpp"
#include "dispatch/in_flight.hpp"
#include "dispatch/loop_observer.hpp"
#include "dispatch/runtime_options.hpp"
#include "dispatch/work_queue.hpp"
#include "metrics/metrics.hpp"
#include "routing/handler_set.hpp"
#include "routing/paused_handlers.hpp"
#include "service/service.hpp"
#include "telemetry/span_exporter.hpp"

namespace outbox::dispatch {

class Worker;

/// The worker side of one host: scheduler, workers, completer, heartbeat, rescuer, the
/// NOTIFY listener and the deadline watch, each on its own thread with its own connection
/// (abandoned calls: docs/design.md, "Stuck handler calls").
class Runtime {
public:
    /// `on_exhausted` is called once (from an internal thread) when the abandoned-thread
    /// limit is exceeded. `loop_observer` (optional, must outlive the runtime) hears every
    /// pass of the scheduler's loop.
    Runtime(RuntimeOptions options, std::shared_ptr<const routing::HandlerSet> handlers, metrics::Metrics& metrics,
            std::function<void()> on_exhausted = {}, LoopObserver* loop_observer = nullptr);
    /// Stops first. Destroying a runtime whose stop() returned false ends the process with
    /// exit code 3: its stuck threads still use its members.
    ~Runtime();
    Runtime(const Runtime&) = delete;
    Runtime& operator=(const Runtime&) = delete;

    void start();

    /// Graceful stop: stop claiming, give back claimed events no worker started, let
    /// running handlers finish within shutdown_timeout (then cancel them through
    /// ctx.cancelled(), and after a short grace abandon them: their leases are left to expire
    /// after the process exits, and the rescuer retries those events), store every outcome,
    /// stop the heartbeat. Returns false when some handler thread never returned: the caller
    /// must then end the process (exit code 3) without destroying anything those threads use.
    bool stop();
    /// The first part of stop(): claiming stops, unstarted events are given back and running
    /// handlers finish, are cancelled or abandoned. What remains (joining the claiming threads,
    /// storing outcomes, the heartbeat) only waits for the database. Returns false when a
    /// handler thread had to be abandoned. stop() calls it when it was not called before.
    bool stop_handlers();

    /// Routes new claims to `handlers` from now on; events already claimed finish with the
    /// handlers they were claimed for (their plugins stay loaded until then).
    void set_handlers(std::shared_ptr<const routing::HandlerSet> handlers);
    [[nodiscard]] std::shared_ptr<const routing::HandlerSet> handlers() const { return handlers_.get(); }
    [[nodiscard]] const routing::CurrentHandlers& current_handlers() const noexcept { return handlers_; }
    /// The host's one outage log: other components report through it too, so an outage is
    /// one line however many threads notice it.
    [[nodiscard]] db::OutageLog& outage() noexcept { return outage_; }

    [[nodiscard]] const RuntimeOptions& options() const noexcept { return options_; }
    /// The handlers paused fleet-wide, as this host last read them.
    [[nodiscard]] const routing::PausedHandlers& paused_handlers() const noexcept { return paused_; }
    [[nodiscard]] std::size_t in_flight() const { return in_flight_.size(); }
    /// Handler threads abandoned and not returned yet.
    [[nodiscard]] int abandoned_threads() const noexcept { return abandoned_; }
    /// More threads were abandoned than outbox.max_abandoned_threads allows.
    [[nodiscard]] bool exhausted() const noexcept { return exhausted_; }

private:
    struct WorkerThread {
        std::thread thread;
        std::shared_ptr<std::atomic<bool>> finished;
    };

    void spawn_worker(WorkQueue::Lane lane);
    void work_loop(const std::shared_ptr<std::atomic<bool>>& finished, WorkQueue::Lane lane);
    /// Runs `first` with the queued events that can share its commit group; returns the
    /// flight of a member whose call was abandoned, or null.
    std::shared_ptr<InFlight> run_group(Worker& worker, Work first, const routing::HandlerEntry& entry);
    void watch_deadlines(std::stop_token stop);
    /// Stores HANDLER_TIMEOUT for a call taken away from its worker and frees its slot.
    void abandon(InFlight& flight, bool replace_thread);
    /// The attempt of an abandoned call that returned at last: HANDLER_TIMEOUT.
    void store_timeout(InFlight& flight);
    void release_unstarted(std::vector<Work> unstarted, std::chrono::steady_clock::time_point deadline);
    /// Joins the worker threads that have finished; true when none is left.
    bool join_finished_workers(std::chrono::steady_clock::time_point deadline);

    RuntimeOptions options_;
    core::RetryPolicy policy_;
    routing::CurrentHandlers handlers_;
    metrics::Metrics& metrics_;
    std::function<void()> on_exhausted_;
    LoopObserver* loop_observer_;
    db::OutageLog outage_;
    db::ConnectionPool pool_;
    InFlightTable in_flight_;
    WorkQueue queue_;
    db::Wakeup wakeup_;
    routing::PausedHandlers paused_;
    CircuitBreakers breakers_;
    const lease::AttemptRecording recording_;
    Completer completer_;
    FleetLimiter limiter_;
    std::unique_ptr<telemetry::SpanExporter> spans_;  // with telemetry.otlp_endpoint only
    std::atomic<bool> stopping_{false};
    std::atomic<bool> hard_stop_{false};
    std::atomic<int> abandoned_{0};
    std::atomic<bool> exhausted_{false};

    // Stopped in this order (each group last started first): claiming, then the deadline
    // watch, then (once the calls drained) the completer and the heartbeat.
    service::ServiceGroup bookkeeping_;  // span exporter, heartbeat, completer
    service::ServiceGroup watch_;        // the deadline watch
    service::ServiceGroup claiming_;     // rescuer, NOTIFY listener, scheduler
    std::stop_source stop_claiming_;     // the scheduler alone, from any thread
    std::mutex workers_mutex_;
    std::vector<WorkerThread> workers_;
    bool started_ = false;
    bool stopped_ = false;
    bool handlers_stopped_ = false;
    std::chrono::steady_clock::time_point stop_started_{};
    bool handlers_clean_ = true;
    bool clean_ = true;
};

}  // namespace outbox::dispatch
