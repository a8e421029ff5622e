#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "dispatch/circuit_breaker.hpp"
#include "dispatch/in_flight.hpp"
#include "lease/lease_store.hpp"
#include "routing/handler_set.hpp"

namespace outbox::dispatch {

struct Work {
    lease::ClaimedEvent claimed;
    std::shared_ptr<InFlight> flight;
    std::shared_ptr<const routing::HandlerSet> handlers;
    bool suspect = false;  // runs in the suspect lane (see WorkQueue)
    std::shared_ptr<Probe> probe;  // the probe call of an open circuit breaker; null: none
};

/// Claimed events waiting for a worker, plus the count of events being worked on. The
/// scheduler claims only free_slots() events, so claims follow free capacity instead of a
/// batch size tuned to the fleet. Besides, one suspect at a time (an event whose earlier
/// attempt's host died) waits for and runs on a worker of its own, outside that capacity,
/// so a host keeps its normal work going while it retries suspects. Thread-safe.
class WorkQueue {
public:
    enum class Lane { Normal, Suspect };

    explicit WorkQueue(int capacity) : capacity_(capacity) {}

    [[nodiscard]] int free_slots() const;
    void push(std::vector<Work> items);
    /// Blocks for the next item of `lane`; nullopt once closed and empty. The caller must
    /// call done().
    std::optional<Work> pop(Lane lane = Lane::Normal);
    /// Takes up to `max` more queued items of the normal lane that `match` accepts, in queue
    /// order and without waiting (a commit group's further events). Each must be done().
    std::vector<Work> take_matching(const std::function<bool(const Work&)>& match, int max);
    /// No suspect is queued or running: the scheduler may claim one.
    [[nodiscard]] bool suspect_lane_free() const;
    void done(const Work& work) { done(work.claimed.event.type, work.suspect); }
    /// Frees the slot of a worker that ran an event of `event_type` (in the suspect lane or not).
    void done(const std::string& event_type, bool suspect);
    /// Stops handing out work at once and returns the items no worker started; items
    /// pushed later stay queued for the next close().
    std::vector<Work> close();
    /// Waits until no worker is busy; false on timeout.
    bool wait_idle(std::chrono::steady_clock::time_point deadline);
    /// Events being worked on, the suspect included.
    [[nodiscard]] int busy() const;
    /// Events waiting for a worker, a suspect included.
    [[nodiscard]] int queued() const;
    /// Nothing queued and nothing running.
    [[nodiscard]] bool idle() const;
    /// Events of `event_type` queued or being worked on.
    [[nodiscard]] int in_flight_of(const std::string& event_type) const;

private:
    const int capacity_;
    mutable std::mutex mutex_;
    std::condition_variable changed_;
    std::deque<Work> items_;
    int busy_ = 0;
    std::optional<Work> suspect_;  // waiting for the suspect lane
    bool suspect_busy_ = false;
    std::map<std::string, int> per_type_;
    bool closed_ = false;
};

}  // namespace outbox::dispatch
