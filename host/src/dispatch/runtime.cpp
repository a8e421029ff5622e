#include "dispatch/runtime.hpp"

#include <map>

#include <unistd.h>

#include "dispatch/heartbeat.hpp"
#include "dispatch/parker.hpp"
#include "dispatch/rescuer.hpp"
#include "dispatch/scheduler.hpp"
#include "dispatch/wakeup_listener.hpp"
#include "dispatch/worker.hpp"
#include "log/log.hpp"

namespace outbox::dispatch {
namespace {
// How often overdue handler calls are looked for: the abandon bound is deadline + grace
// + this.
constexpr auto kDeadlineWatchInterval = std::chrono::milliseconds{100};
// After shutdown_timeout the running calls are cancelled; this long after, abandoned.
constexpr auto kCancelGrace = std::chrono::seconds{5};
// How long a stop keeps trying to store outcomes while the database is unreachable (their
// leases then expire and the events are retried).
constexpr auto kStoreOutcomesGrace = std::chrono::seconds{5};
}  // namespace

RuntimeOptions RuntimeOptions::from(const config::Config& config, const std::string& host_id) {
    RuntimeOptions o;
    static_cast<config::Config::Outbox&>(o) = config.outbox;
    o.host_id = host_id;
    o.database_url = config.database.url;
    o.session_url = config.database.session_url;
    o.pool_size = config.database.pool_size;
    o.telemetry = config.telemetry;
    std::map<std::string, int> weights, caps;
    for (const auto& [company, tenant] : config.tenants.companies) {
        weights[company] = tenant.weight;
        if (tenant.max_concurrency) caps[company] = *tenant.max_concurrency;
    }
    o.tenants = lease::tenant_shares_of(weights, caps, config.tenants.default_max_concurrency.value_or(0));
    return o;
}

// Beyond one event per worker the queue holds up to one batch more, so a worker that
// finishes finds its next event without waiting for a claim round trip.
Runtime::Runtime(RuntimeOptions options, std::shared_ptr<const routing::HandlerSet> handlers, metrics::Metrics& metrics,
                 std::function<void()> on_exhausted, LoopObserver* loop_observer)
    : options_(std::move(options)), policy_(options_.initial_backoff, options_.max_backoff),
      handlers_(std::move(handlers)), metrics_(metrics), on_exhausted_(std::move(on_exhausted)),
      loop_observer_(loop_observer),
      pool_(options_.database_url, options_.pool_size), queue_(options_.concurrency + options_.batch_size),
      breakers_(options_.host_id, pool_, metrics_, paused_, wakeup_),
      recording_{lease::attempt_history_of(options_.attempt_history), options_.host_id},
      completer_(options_.database_url, outage_, in_flight_, metrics_, wakeup_, recording_.host), limiter_(options_.database_url, outage_,
               FleetLimiter::Options{.holder = options_.host_id, .session_url = options_.session_url}) {
    if (!options_.telemetry.otlp_endpoint.empty()) {
        spans_ = std::make_unique<telemetry::SpanExporter>(
            telemetry::SpanExporter::Options{.endpoint = options_.telemetry.otlp_endpoint,
                                             .service_name = options_.telemetry.service_name,
                                             .service_version = OUTBOXD_VERSION,
                                             .instance_id = options_.host_id},
            metrics_);
    }
}

Runtime::~Runtime() {
    if (stop()) return;
    log::error("handler threads are still running and use this host's state: exiting with code 3");
    spdlog::default_logger_raw()->flush();
    std::_Exit(3);
}

void Runtime::start() {
    if (started_) return;
    started_ = true;
    // First started, last stopped: the spans of the last calls still leave.
    if (spans_) bookkeeping_.start("span exporter", [this](std::stop_token stop) { spans_->run(stop); });
    bookkeeping_.start("heartbeat", [this](std::stop_token stop) {
        Heartbeat(options_.database_url, outage_, in_flight_, metrics_, options_.lease_duration,
                  options_.heartbeat_interval())
            .run(stop);
    });
    bookkeeping_.start("completer", [this](std::stop_token stop) { completer_.run(stop, kStoreOutcomesGrace); });
    if (!options_.enabled) {
        log::info("processing is disabled (outbox.enabled=false): this host claims nothing");
        return;
    }
    claiming_.start("rescuer", [this](std::stop_token stop) {
        Rescuer(options_.database_url, outage_, metrics_, options_.max_attempts, options_.rescue_interval(),
                recording_.mode != lease::AttemptHistory::Off)
            .run(stop);
    });
    claiming_.start("parker", [this](std::stop_token stop) {
        Parker(options_.database_url, outage_, options_.park_interval(), options_.rescue_interval()).run(stop);
    });
    claiming_.start("listener", [this](std::stop_token stop) {
        WakeupListener(listen_url(options_.database_url, options_.session_url), outage_, wakeup_, handlers_, paused_).run(stop);
    });
    for (int i = 0; i < options_.concurrency; ++i) spawn_worker(WorkQueue::Lane::Normal);
    // One worker more than outbox.concurrency: it runs suspects only, one at a time.
    spawn_worker(WorkQueue::Lane::Suspect);
    watch_.start("deadline watch", [this](std::stop_token stop) { watch_deadlines(stop); });
    claiming_.start("scheduler", [this](std::stop_token stop) {
        // Stopped with the group, or alone when the host cannot keep its concurrency.
        const std::stop_callback forward(stop, [this] { stop_claiming_.request_stop(); });
        Scheduler(options_, outage_, queue_, in_flight_, wakeup_, metrics_, handlers_, paused_, breakers_, loop_observer_,
                  spans_.get())
            .run(stop_claiming_.get_token());
    });
}

void Runtime::spawn_worker(WorkQueue::Lane lane) {
    auto finished = std::make_shared<std::atomic<bool>>(false);
    std::lock_guard lock(workers_mutex_);
    // Threads of abandoned calls that returned since are joined here, not only at stop.
    std::erase_if(workers_, [](WorkerThread& worker) {
        if (!worker.finished->load()) return false;
        worker.thread.join();
        return true;
    });
    workers_.push_back({std::thread([this, finished, lane] { work_loop(finished, lane); }), finished});
}

void Runtime::work_loop(const std::shared_ptr<std::atomic<bool>>& finished, WorkQueue::Lane lane) {
    Worker worker(pool_, completer_, in_flight_, limiter_, metrics_, queue_, stopping_, hard_stop_, policy_,
                  options_.max_attempts, options_.abandon_grace, paused_, breakers_, recording_, spans_.get());
    while (auto work = queue_.pop(lane)) {
        std::shared_ptr<InFlight> stuck;
        if (const routing::HandlerEntry* entry = lane == WorkQueue::Lane::Normal ? grouping_handler(*work) : nullptr) {
            stuck = run_group(worker, std::move(*work), *entry);
        } else {
            // Frees the queue slot however process() ends, unless the call was abandoned:
            // then the host freed it already.
            struct Slot {
                WorkQueue& queue;
                const Work& work;
                bool owned = true;
                ~Slot() {
                    if (owned) queue.done(work);
                }
            } slot{queue_, *work};
            if (!worker.process(*work)) {
                slot.owned = false;
                stuck = work->flight;
            }
        }
        if (stuck) {
            // Only now, with the call over, may the event run again: its attempt ends with
            // HANDLER_TIMEOUT (its late ctx.db() work was rolled back with its session).
            store_timeout(*stuck);
            metrics_.abandoned_threads(--abandoned_);
            log::warn("an abandoned handler call returned at last; its attempt is stored as HANDLER_TIMEOUT and its "
                      "thread ends",
                      {stuck->lease.event_id, stuck->event_type, {}, stuck->attempt, "HANDLER_TIMEOUT", {}});
            break;
        }
        wakeup_.notify();
    }
    finished->store(true);
}

// A commit group takes the events of its handler already queued behind `first`, up to
// commit_group.max_events, without waiting for more: a lone event runs as a group of one.
std::shared_ptr<InFlight> Runtime::run_group(Worker& worker, Work first, const routing::HandlerEntry& entry) {
    std::vector<Work> works;
    const auto handlers = first.handlers;
    works.push_back(std::move(first));
    for (auto& more : queue_.take_matching(
             [&](const Work& w) { return w.handlers == handlers && grouping_handler(w) == &entry; },
             entry.settings.commit_group.max_events - 1)) {
        works.push_back(std::move(more));
    }
    return worker.process_group(std::move(works), entry);
}

void Runtime::watch_deadlines(std::stop_token stop) {
    while (db::sleep_for(kDeadlineWatchInterval, stop)) {
        const auto now = std::chrono::steady_clock::now();
        for (const auto& flight : in_flight_.snapshot()) {
            if (!flight->try_abandon(now)) continue;
            try {
                abandon(*flight, true);
            } catch (const std::exception&) {
                // No thread to replace the stuck one (a process or memory limit): the host
                // cannot keep its concurrency, so it stops as when too many are stuck.
                if (!exhausted_.exchange(true)) {
                    log::error("cannot start a thread to replace an abandoned handler call; this host stops claiming "
                               "and exits with code 3");
                    stop_claiming_.request_stop();
                    if (on_exhausted_) on_exhausted_();
                }
            }
        }
    }
}

// An abandoned call keeps its event: the lease stays in the in-flight table, so the
// heartbeat extends it, no other host runs the event and no later event of its aggregate
// starts, and the fleet slot the call holds stays taken (correctness review F2, F4). Its
// ctx.db() session is ended now, so whatever it does later never commits. Its worker's
// place is given to a new thread; the outcome is stored when the call returns
// (store_timeout), or, if it never does, the lease expires after the host exits and the
// rescuer retries the event.
void Runtime::abandon(InFlight& flight, bool replace_thread) {
    flight.forfeit_connection();
    queue_.done(flight.event_type, flight.suspect);
    const int stuck = ++abandoned_;
    metrics_.abandoned_threads(stuck);
    log::error("a handler call did not return by its deadline plus outbox.abandon_grace; abandoned it (" +
                   std::to_string(stuck) + " abandoned thread(s)); its event stays leased to this host until the call "
                   "returns",
               {flight.lease.event_id, flight.event_type, {}, flight.attempt, "HANDLER_TIMEOUT", {}});
    if (!replace_thread) return;
    if (stuck <= options_.abandoned_thread_limit()) {
        spawn_worker(flight.suspect ? WorkQueue::Lane::Suspect : WorkQueue::Lane::Normal);
        return;
    }
    if (!exhausted_.exchange(true)) {
        log::error("more than outbox.max_abandoned_threads (" + std::to_string(options_.abandoned_thread_limit()) +
                   ") handler threads are stuck: this host stops claiming and exits with code 3 once the other "
                   "calls finish");
        stop_claiming_.request_stop();
        if (on_exhausted_) on_exhausted_();
    }
}

void Runtime::store_timeout(InFlight& flight) {
    if (flight.lost) {
        in_flight_.remove(flight.lease);  // another host owns the event: nothing to store
        return;
    }
    const core::HandlerOutcome timeout{core::HandlerOutcome::Kind::Retry, "HANDLER_TIMEOUT", std::nullopt};
    const auto transition = core::decide_transition({timeout}, flight.attempt, options_.max_attempts, policy_,
                                                    std::chrono::system_clock::now(), unit_random());
    flight.finishing = true;
    completer_.submit(lease::Finish{flight.lease, *transition, {}, std::move(flight.calls)});
}

void Runtime::set_handlers(std::shared_ptr<const routing::HandlerSet> handlers) {
    handlers_.set(std::move(handlers));
    wakeup_.notify();  // new event types may be due already
}

void Runtime::release_unstarted(std::vector<Work> unstarted, std::chrono::steady_clock::time_point deadline) {
    if (unstarted.empty()) return;
    std::vector<lease::LeaseRef> leases;
    for (const auto& work : unstarted) leases.push_back(work.flight->lease);
    if (outage_.down()) {
        // Trying would only spend the stop's time budget: their leases expire instead.
        log::warn(std::to_string(leases.size()) + " claimed event(s) not given back (the database is unreachable); "
                  "they are claimable again when their leases expire");
        for (const auto& ref : leases) in_flight_.remove(ref);
        return;
    }
    db::DbSession session(options_.database_url, "shutdown", outage_);
    std::stop_source never;
    // Not giving them back only delays them until their leases expire.
    for (int attempt = 0; attempt < 5 && (attempt == 0 || std::chrono::steady_clock::now() < deadline); ++attempt) {
        int released = 0;
        if (session.run(
                [&](pqxx::connection& conn) {
                    released = lease::LeaseStore(conn).release(leases);
                    // A circuit breaker's probe that never ran: another host may probe at once.
                    for (const auto& work : unstarted) {
                        if (work.probe && !work.probe->settled.exchange(true)) {
                            breakers_.release_probe(conn, work.probe->handler, work.probe->token);
                        }
                    }
                },
                never.get_token())) {
            log::info("released " + std::to_string(released) + " claimed event(s) no handler had started");
            break;
        }
    }
    for (const auto& ref : leases) in_flight_.remove(ref);
}

bool Runtime::join_finished_workers(std::chrono::steady_clock::time_point deadline) {
    while (true) {
        {
            std::lock_guard lock(workers_mutex_);
            std::erase_if(workers_, [](WorkerThread& worker) {
                if (!worker.finished->load()) return false;
                worker.thread.join();
                return true;
            });
            if (workers_.empty()) return true;
        }
        if (std::chrono::steady_clock::now() >= deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds{20});
    }
}

bool Runtime::stop_handlers() {
    if (!started_ || handlers_stopped_) return handlers_clean_;
    stop_started_ = std::chrono::steady_clock::now();
    handlers_stopped_ = true;
    stopping_ = true;
    const auto shutdown_deadline = stop_started_ + options_.shutdown_timeout;
    // Workers take nothing new from here, even while the scheduler is still inside a
    // database call (up to database.call_timeout): the claiming threads are asked to stop
    // now and joined once the handlers are done, so a silent database cannot delay the
    // handlers' part of the stop.
    std::vector<Work> unstarted = queue_.close();
    claiming_.request_stop();
    // From here only this thread abandons calls: no replacement threads while stopping.
    watch_.stop();
    release_unstarted(std::move(unstarted), shutdown_deadline);

    if (!queue_.wait_idle(shutdown_deadline)) {
        log::warn(std::to_string(queue_.busy()) +
                  " handler call(s) still running after outbox.shutdown_timeout; cancelling them");
        hard_stop_ = true;
        if (!queue_.wait_idle(std::chrono::steady_clock::now() + kCancelGrace)) {
            for (const auto& flight : in_flight_.snapshot()) {
                if (flight->force_abandon()) abandon(*flight, false);
            }
            // Workers outside handle() (committing, re-reading, giving back) are bounded by
            // their database calls' deadlines: let them store what they have.
            queue_.wait_idle(std::chrono::steady_clock::now() + db::connection_settings().call_timeout);
        }
    }
    handlers_clean_ = abandoned_.load() == 0;
    return handlers_clean_;
}

bool Runtime::stop() {
    if (!started_ || stopped_) return clean_;
    stopped_ = true;
    stop_handlers();
    const auto shutdown_deadline = stop_started_ + options_.shutdown_timeout;
    claiming_.stop();
    // Claimed while stopping, before the scheduler saw the stop.
    release_unstarted(queue_.close(), std::max(shutdown_deadline, std::chrono::steady_clock::now() + std::chrono::seconds{1}));

    bookkeeping_.stop();

    // Workers leave once the closed queue is empty; abandoned ones only if handle() returns.
    clean_ = join_finished_workers(std::max(shutdown_deadline, std::chrono::steady_clock::now() + std::chrono::seconds{1}));
    if (!clean_) {
        log::error(std::to_string(abandoned_.load()) +
                   " handler thread(s) never returned from handle(); their events stay leased to this host until the "
                   "leases expire, and the rescuer retries them");
    }
    return clean_;
}

}  // namespace outbox::dispatch
