#pragma once

#include <chrono>

namespace outbox::core {

/// Exponential backoff with "equal jitter": the delay before attempt n+1 is drawn from
/// [d/2, d] where d = min(max_backoff, initial_backoff * 2^(n-1)). Half the delay is
/// guaranteed (a failing remote gets breathing room); the random half spreads retries of
/// a burst so they do not return together. Pure: the random draw is a parameter.
class RetryPolicy {
public:
    RetryPolicy(std::chrono::milliseconds initial_backoff, std::chrono::milliseconds max_backoff) noexcept;

    /// Ceiling of the delay after `attempt` failed attempts (attempt >= 1).
    [[nodiscard]] std::chrono::milliseconds ceiling(int attempt) const noexcept;

    /// The delay to wait after `attempt` failed attempts; `unit_random` in [0, 1).
    [[nodiscard]] std::chrono::milliseconds delay(int attempt, double unit_random) const noexcept;

private:
    std::chrono::milliseconds initial_;
    std::chrono::milliseconds max_;
};

}  // namespace outbox::core
