#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>

namespace outbox::core {

/// One host's record of a handler's recent calls, for its circuit breaker: how many ended
/// in the sliding window and how many of them with a retryable failure. The window is kept
/// in twentieths (a call counts for between 19/20 and all of `window` after it ended), so
/// memory does not grow with the call rate. Pure: the clock is a parameter. Not thread-safe.
class CircuitWindow {
public:
    struct Tally {
        int calls = 0;
        int failures = 0;
        bool operator==(const Tally&) const = default;
    };

    /// `min_calls` >= 1, `failure_ratio` in (0, 1], `window` > 0.
    CircuitWindow(std::chrono::milliseconds window, int min_calls, double failure_ratio) noexcept;

    /// Records one call that ended at `now` (`failed`: a retryable failure). Returns the
    /// window's tally when it trips the breaker: at least `min_calls` calls, and failures
    /// making up at least `failure_ratio` of them. The window then starts empty again.
    std::optional<Tally> record(std::chrono::steady_clock::time_point now, bool failed) noexcept;
    /// The calls in the window that ends at `now`.
    [[nodiscard]] Tally tally(std::chrono::steady_clock::time_point now) const noexcept;
    void clear() noexcept;

private:
    static constexpr int kSlices = 20;
    struct Slice {
        std::int64_t index = -1;  // which slice of time it counts; -1: none
        int calls = 0;
        int failures = 0;
    };
    [[nodiscard]] std::int64_t slice_of(std::chrono::steady_clock::time_point now) const noexcept;

    std::chrono::nanoseconds slice_;
    int min_calls_;
    double failure_ratio_;
    std::array<Slice, kSlices> slices_{};
};

}  // namespace outbox::core
