#include "core/retry_policy.hpp"

#include <algorithm>

namespace outbox::core {

RetryPolicy::RetryPolicy(std::chrono::milliseconds initial_backoff, std::chrono::milliseconds max_backoff) noexcept
    : initial_(std::max(initial_backoff, std::chrono::milliseconds{0})), max_(std::max(max_backoff, initial_)) {}

std::chrono::milliseconds RetryPolicy::ceiling(int attempt) const noexcept {
    auto delay = initial_;
    for (int i = 1; i < attempt && delay < max_; ++i) delay *= 2;  // stops before overflow
    return std::min(delay, max_);
}

std::chrono::milliseconds RetryPolicy::delay(int attempt, double unit_random) const noexcept {
    const auto top = ceiling(attempt);
    const double r = std::clamp(unit_random, 0.0, 1.0);
    const auto half = top / 2;
    return half + std::chrono::milliseconds{static_cast<long long>(static_cast<double>((top - half).count()) * r)};
}

}  // namespace outbox::core
