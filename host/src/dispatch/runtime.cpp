#include "dispatch/runtime.hpp"

#include <unistd.h>

#include "dispatch/heartbeat.hpp"
#include "dispatch/scheduler.hpp"
#include "dispatch/wakeup_listener.hpp"
#include "dispatch/worker.hpp"
#include "log/log.hpp"

namespace outbox::dispatch {

RuntimeOptions RuntimeOptions::from(const config::Config& config, const std::string& host_id) {
    RuntimeOptions o;
    o.database_url = config.database.url;
    o.pool_size = config.database.pool_size;
    o.host_id = host_id;
    o.enabled = config.outbox.enabled;
    o.poll_interval = config.outbox.poll_interval;
    o.batch_size = config.outbox.batch_size;
    o.lease_duration = config.outbox.lease_duration;
    o.max_attempts = config.outbox.max_attempts;
    o.initial_backoff = config.outbox.initial_backoff;
    o.max_backoff = config.outbox.max_backoff;
    o.concurrency = config.outbox.concurrency;
    o.shutdown_timeout = config.outbox.shutdown_timeout;
    return o;
}

// Beyond one event per worker the queue holds up to one batch more, so a worker that
// finishes finds its next event without waiting for a claim round trip.
Runtime::Runtime(RuntimeOptions options, std::shared_ptr<const HandlerSet> handlers, metrics::Metrics& metrics)
    : options_(std::move(options)), handlers_(std::move(handlers)), metrics_(metrics),
      pool_(options_.database_url, options_.pool_size), queue_(options_.concurrency + options_.batch_size),
      completer_(options_.database_url, outage_, in_flight_, metrics_, wakeup_), limiter_(options_.database_url, outage_, FleetLimiter::Options{.holder = options_.host_id}) {}

Runtime::~Runtime() { stop(); }

void Runtime::start() {
    if (started_) return;
    started_ = true;
    completer_thread_ = std::jthread([this](std::stop_token stop) { completer_.run(stop, std::chrono::seconds{10}); });
    heartbeat_ = std::jthread([this](std::stop_token stop) {
        Heartbeat(options_.database_url, outage_, in_flight_, metrics_, options_.lease_duration,
                  options_.heartbeat_interval())
            .run(stop);
    });
    if (!options_.enabled) {
        log::info("processing is disabled (outbox.enabled=false): this host claims nothing");
        return;
    }
    rescuer_ = std::jthread([this](std::stop_token stop) {
        Rescuer(options_.database_url, outage_, metrics_, options_.max_attempts, options_.rescue_interval()).run(stop);
    });
    listener_ = std::jthread([this](std::stop_token stop) {
        WakeupListener(options_.database_url, outage_, wakeup_, handlers_).run(stop);
    });
    const core::RetryPolicy policy(options_.initial_backoff, options_.max_backoff);
    // One worker more than outbox.concurrency: it runs suspects only, one at a time.
    for (int i = 0; i <= options_.concurrency; ++i) {
        const auto lane = i < options_.concurrency ? WorkQueue::Lane::Normal : WorkQueue::Lane::Suspect;
        workers_.emplace_back([this, policy, lane] {
            Worker worker(pool_, completer_, in_flight_, limiter_, metrics_, stopping_, hard_stop_, policy,
                          options_.max_attempts);
            while (auto work = queue_.pop(lane)) {
                worker.process(*work);
                queue_.done(*work);
                wakeup_.notify();
            }
        });
    }
    scheduler_ = std::jthread([this](std::stop_token stop) {
        Scheduler(options_, outage_, queue_, in_flight_, wakeup_, metrics_, handlers_).run(stop);
    });
}

void Runtime::set_handlers(std::shared_ptr<const HandlerSet> handlers) {
    handlers_.set(std::move(handlers));
    wakeup_.notify();  // new event types may be due already
}

void Runtime::release_unstarted(std::vector<Work> unstarted) {
    if (unstarted.empty()) return;
    std::vector<lease::LeaseRef> leases;
    for (const auto& work : unstarted) leases.push_back(work.flight->lease);
    DbSession session(options_.database_url, "shutdown", outage_);
    std::stop_source never;
    for (int attempt = 0; attempt < 5; ++attempt) {
        int released = 0;
        if (session.run([&](pqxx::connection& conn) { released = lease::LeaseStore(conn).release(leases); },
                        never.get_token())) {
            log::info("released " + std::to_string(released) + " claimed event(s) no handler had started");
            break;
        }
    }
    for (const auto& ref : leases) in_flight_.remove(ref);
}

bool Runtime::stop() {
    if (!started_ || stopped_) return true;
    stopped_ = true;
    stopping_ = true;
    scheduler_.request_stop();
    listener_.request_stop();
    rescuer_.request_stop();
    if (scheduler_.joinable()) scheduler_.join();
    if (listener_.joinable()) listener_.join();
    if (rescuer_.joinable()) rescuer_.join();

    release_unstarted(queue_.close());

    bool clean = queue_.wait_idle(std::chrono::steady_clock::now() + options_.shutdown_timeout);
    if (!clean) {
        log::warn(std::to_string(queue_.busy()) +
                  " handler call(s) still running after outbox.shutdown_timeout; cancelling them");
        hard_stop_ = true;
        clean = queue_.wait_idle(std::chrono::steady_clock::now() + std::chrono::seconds{5});
    }
    if (clean) {
        for (auto& worker : workers_) worker.join();
    } else {
        log::error(std::to_string(queue_.busy()) +
                   " handler call(s) ignored cancellation; exiting without them (their leases expire and the events "
                   "are retried)");
        for (auto& worker : workers_) worker.detach();
    }
    workers_.clear();

    completer_thread_.request_stop();
    if (completer_thread_.joinable()) completer_thread_.join();
    heartbeat_.request_stop();
    if (heartbeat_.joinable()) heartbeat_.join();
    return clean;
}

}  // namespace outbox::dispatch
