#include "core/circuit_window.hpp"

#include <algorithm>

namespace outbox::core {

CircuitWindow::CircuitWindow(std::chrono::milliseconds window, int min_calls, double failure_ratio) noexcept
    : slice_(std::max<std::chrono::nanoseconds>(std::chrono::nanoseconds{1},
                                                std::chrono::nanoseconds{window} / kSlices)),
      min_calls_(std::max(1, min_calls)),
      failure_ratio_(failure_ratio) {}

std::int64_t CircuitWindow::slice_of(std::chrono::steady_clock::time_point now) const noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count() / slice_.count();
}

std::optional<CircuitWindow::Tally> CircuitWindow::record(std::chrono::steady_clock::time_point now,
                                                          bool failed) noexcept {
    const std::int64_t index = slice_of(now);
    Slice& slice = slices_[static_cast<std::size_t>(index % kSlices)];
    if (slice.index != index) slice = Slice{index, 0, 0};
    ++slice.calls;
    if (failed) ++slice.failures;
    const Tally now_tally = tally(now);
    // failures / calls >= ratio, with slack for binary fractions: 0.55 * 100 is
    // 55.00000000000001, and 55 failures of 100 calls must trip a ratio of 0.55.
    if (now_tally.calls < min_calls_ ||
        static_cast<double>(now_tally.failures) < failure_ratio_ * now_tally.calls - 1e-9) {
        return std::nullopt;
    }
    clear();
    return now_tally;
}

CircuitWindow::Tally CircuitWindow::tally(std::chrono::steady_clock::time_point now) const noexcept {
    const std::int64_t newest = slice_of(now);
    Tally total;
    for (const Slice& slice : slices_) {
        if (slice.index > newest - kSlices && slice.index <= newest) {
            total.calls += slice.calls;
            total.failures += slice.failures;
        }
    }
    return total;
}

void CircuitWindow::clear() noexcept { slices_.fill(Slice{}); }

}  // namespace outbox::core
