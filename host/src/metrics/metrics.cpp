#include "metrics/metrics.hpp"

namespace outbox::metrics {

void Metrics::event_outcome(Outcome outcome, std::uint64_t n) noexcept {
    outcomes_[static_cast<std::size_t>(outcome)] += n;
}

std::uint64_t Metrics::outcome_count(Outcome outcome) const noexcept {
    return outcomes_[static_cast<std::size_t>(outcome)];
}

void Metrics::handler_call(const std::string& handler, const std::string& result, std::chrono::nanoseconds duration) {
    const double seconds = std::chrono::duration<double>(duration).count();
    std::lock_guard lock(mutex_);
    ++calls_[{handler, result}];
    Histogram& histogram = durations_[handler];
    ++histogram.count;
    histogram.sum += seconds;
    for (std::size_t i = 0; i < kDurationBuckets.size(); ++i) {
        if (seconds <= kDurationBuckets[i]) {
            ++histogram.buckets[i];
            break;
        }
    }
}

std::map<std::pair<std::string, std::string>, std::uint64_t> Metrics::handler_calls() const {
    std::lock_guard lock(mutex_);
    return calls_;
}

std::map<std::string, Histogram> Metrics::handler_durations() const {
    std::lock_guard lock(mutex_);
    return durations_;
}

void Metrics::circuit_opened(const std::string& handler) {
    std::lock_guard lock(mutex_);
    ++circuit_openings_[handler];
}

void Metrics::circuit_probe(const std::string& handler, const std::string& result) {
    std::lock_guard lock(mutex_);
    ++circuit_probes_[{handler, result}];
}

std::map<std::string, std::uint64_t> Metrics::circuit_openings() const {
    std::lock_guard lock(mutex_);
    return circuit_openings_;
}

std::map<std::pair<std::string, std::string>, std::uint64_t> Metrics::circuit_probes() const {
    std::lock_guard lock(mutex_);
    return circuit_probes_;
}

}  // namespace outbox::metrics
