#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "core/event_status.hpp"
#include "core/retry_policy.hpp"

namespace outbox::core {

using Clock = std::chrono::system_clock;

/// The outcome of running one handler on one event, as a value.
struct HandlerOutcome {
    enum class Kind {
        Succeeded,  // consumption recorded (or to be recorded)
        Retry,      // retryable failure
        Review,     // non-retryable failure
        LeaseLost,  // the host no longer owns the event: nothing may be written
    };
    Kind kind = Kind::Succeeded;
    std::string error_code;  // safe token for Retry/Review
    std::optional<std::chrono::milliseconds> retry_after;
};

/// Where a PROCESSING event goes after one attempt.
struct Transition {
    EventStatus status = EventStatus::Completed;
    std::optional<Clock::time_point> next_attempt_at;  // set for RetryWait
    std::string error_code;                            // empty for Completed
};

/// Folds the outcomes of every handler run in one attempt into the event's next state:
/// all succeeded -> COMPLETED; any non-retryable -> REVIEW_REQUIRED (its code); otherwise
/// a retryable failure -> RETRY_WAIT after max(backoff, largest retry_after), or
/// REVIEW_REQUIRED once `attempt_count` (already counting this attempt) reached
/// `max_attempts`. Returns nullopt when any outcome is LeaseLost: the host must not touch
/// the row. `unit_random` in [0, 1) draws the jitter.
std::optional<Transition> decide_transition(const std::vector<HandlerOutcome>& outcomes, int attempt_count,
                                            int max_attempts, const RetryPolicy& policy, Clock::time_point now,
                                            double unit_random);

/// What an operator can do to one event.
enum class OperatorAction {
    Retry,    // run it again from attempt 1
    Discard,  // give up on it: handlers never run it again, its aggregate's later events go on
    Cancel,   // give up on it before it failed: a Discard of a PENDING or RETRY_WAIT event only
};

/// Where an operator action moves an event in `from`: a REVIEW_REQUIRED event can be
/// retried (-> PENDING); a REVIEW_REQUIRED, PENDING or RETRY_WAIT one discarded (->
/// DISCARDED), so a head no host handles can be cleared; a PENDING or RETRY_WAIT one
/// cancelled (-> DISCARDED). Never a PROCESSING one: a handler may be running it. nullopt
/// for every other pair.
std::optional<EventStatus> operator_transition(EventStatus from, OperatorAction action) noexcept;

inline constexpr const char* kWorkerLostCode = "WORKER_LOST";

/// Returns `code` when it is a safe token ([A-Z][A-Z0-9_]{0,63}), otherwise "INVALID_ERROR_CODE":
/// a plugin cannot smuggle payload data or text into last_error_code or the logs.
std::string sanitize_error_code(const std::string& code);

}  // namespace outbox::core
