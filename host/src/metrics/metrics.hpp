#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace outbox::metrics {

/// Upper bounds (seconds) of the handler duration histogram buckets.
inline constexpr std::array<double, 12> kDurationBuckets{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                         0.1,   0.25,   0.5,   1.0,  2.5,   10.0};

struct Histogram {
    std::array<std::uint64_t, kDurationBuckets.size()> buckets{};  // non-cumulative counts
    std::uint64_t count = 0;
    double sum = 0;
};

/// Process-wide counters of what this host did. Thread-safe; cheap on the hot path.
class Metrics {
public:
    /// What became of an event attempt (or of an event an operator discarded): WorkerLost is
    /// the rescuer's outcome for an attempt whose host stopped renewing its lease.
    enum class Outcome { Completed, Retry, ReviewRequired, WorkerLost, Discarded };

    void event_outcome(Outcome outcome, std::uint64_t n = 1) noexcept;
    void handler_call(const std::string& handler, const std::string& result, std::chrono::nanoseconds duration);
    void leases_lost(std::uint64_t n) noexcept { leases_lost_ += n; }
    void outcomes_refused(std::uint64_t n) noexcept { outcomes_refused_ += n; }
    void events_claimed(std::uint64_t n) noexcept { claimed_ += n; }
    void events_rescued(std::uint64_t n) noexcept { rescued_ += n; }
    void plugin_load_failures(std::uint64_t n) noexcept { plugin_load_failures_ += n; }
    void admin_connections_refused(std::uint64_t n) noexcept { admin_connections_refused_ += n; }
    void telemetry_spans_exported(std::uint64_t n) noexcept { spans_exported_ += n; }
    void telemetry_spans_dropped(std::uint64_t n) noexcept { spans_dropped_ += n; }
    /// Handler threads abandoned past their deadline that have not returned (a gauge).
    void abandoned_threads(int n) noexcept { abandoned_threads_ = n; }
    /// This host opened `handler`'s circuit breaker (paused it fleet-wide).
    void circuit_opened(const std::string& handler);
    /// This host's probe call of `handler` ended: `result` "success" or "failure".
    void circuit_probe(const std::string& handler, const std::string& result);

    [[nodiscard]] std::uint64_t outcome_count(Outcome outcome) const noexcept;
    [[nodiscard]] std::uint64_t leases_lost() const noexcept { return leases_lost_; }
    [[nodiscard]] std::uint64_t outcomes_refused() const noexcept { return outcomes_refused_; }
    [[nodiscard]] std::uint64_t events_claimed() const noexcept { return claimed_; }
    [[nodiscard]] std::uint64_t events_rescued() const noexcept { return rescued_; }
    [[nodiscard]] std::uint64_t plugin_load_failures() const noexcept { return plugin_load_failures_; }
    [[nodiscard]] std::uint64_t admin_connections_refused() const noexcept { return admin_connections_refused_; }
    [[nodiscard]] std::uint64_t telemetry_spans_exported() const noexcept { return spans_exported_; }
    [[nodiscard]] std::uint64_t telemetry_spans_dropped() const noexcept { return spans_dropped_; }
    [[nodiscard]] int abandoned_threads() const noexcept { return abandoned_threads_; }
    /// (handler, result) -> calls
    [[nodiscard]] std::map<std::pair<std::string, std::string>, std::uint64_t> handler_calls() const;
    [[nodiscard]] std::map<std::string, Histogram> handler_durations() const;
    /// handler -> breaker openings by this host
    [[nodiscard]] std::map<std::string, std::uint64_t> circuit_openings() const;
    /// (handler, result) -> probe calls by this host
    [[nodiscard]] std::map<std::pair<std::string, std::string>, std::uint64_t> circuit_probes() const;

private:
    std::array<std::atomic<std::uint64_t>, 5> outcomes_{};
    std::atomic<std::uint64_t> leases_lost_{0};
    std::atomic<std::uint64_t> outcomes_refused_{0};
    std::atomic<std::uint64_t> claimed_{0};
    std::atomic<std::uint64_t> rescued_{0};
    std::atomic<std::uint64_t> plugin_load_failures_{0};
    std::atomic<std::uint64_t> admin_connections_refused_{0};
    std::atomic<std::uint64_t> spans_exported_{0};
    std::atomic<std::uint64_t> spans_dropped_{0};
    std::atomic<int> abandoned_threads_{0};
    mutable std::mutex mutex_;
    std::map<std::pair<std::string, std::string>, std::uint64_t> calls_;
    std::map<std::string, Histogram> durations_;
    std::map<std::string, std::uint64_t> circuit_openings_;
    std::map<std::pair<std::string, std::string>, std::uint64_t> circuit_probes_;
};

}  // namespace outbox::metrics
