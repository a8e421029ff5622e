#include "core/transition.hpp"

#include <algorithm>

#include "core/identifiers.hpp"

namespace outbox::core {

std::optional<Transition> decide_transition(const std::vector<HandlerOutcome>& outcomes, int attempt_count,
                                            int max_attempts, const RetryPolicy& policy, Clock::time_point now,
                                            double unit_random) {
    const HandlerOutcome* review = nullptr;
    const HandlerOutcome* retry = nullptr;
    std::chrono::milliseconds retry_after{0};
    for (const auto& outcome : outcomes) {
        switch (outcome.kind) {
            case HandlerOutcome::Kind::LeaseLost: return std::nullopt;
            case HandlerOutcome::Kind::Review:
                if (review == nullptr) review = &outcome;
                break;
            case HandlerOutcome::Kind::Retry:
                if (retry == nullptr) retry = &outcome;
                if (outcome.retry_after) retry_after = std::max(retry_after, *outcome.retry_after);
                break;
            case HandlerOutcome::Kind::Succeeded: break;
        }
    }
    if (review != nullptr) return Transition{EventStatus::ReviewRequired, std::nullopt, review->error_code};
    if (retry == nullptr) return Transition{EventStatus::Completed, std::nullopt, {}};
    if (attempt_count >= max_attempts) return Transition{EventStatus::ReviewRequired, std::nullopt, retry->error_code};
    const auto backoff = policy.delay(std::max(attempt_count, 1), unit_random);
    return Transition{EventStatus::RetryWait, now + std::max(backoff, retry_after), retry->error_code};
}

std::optional<EventStatus> operator_transition(EventStatus from, OperatorAction action) noexcept {
    if (action == OperatorAction::Retry) {
        return from == EventStatus::ReviewRequired ? std::optional(EventStatus::Pending) : std::nullopt;
    }
    const bool waiting = from == EventStatus::Pending || from == EventStatus::RetryWait;
    const bool discardable = waiting || (action == OperatorAction::Discard && from == EventStatus::ReviewRequired);
    return discardable ? std::optional(EventStatus::Discarded) : std::nullopt;
}

std::string sanitize_error_code(const std::string& code) { return is_error_code(code) ? code : std::string("INVALID_ERROR_CODE"); }

}  // namespace outbox::core
