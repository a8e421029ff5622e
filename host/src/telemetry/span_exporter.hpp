#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <stop_token>
#include <string>
#include <vector>

#include "metrics/metrics.hpp"
#include "telemetry/span.hpp"

namespace outbox::telemetry {

/// Exports finished spans over OTLP/HTTP from a bounded queue on a thread of its own.
/// record() never blocks and never allocates beyond the queue's bound: a span that finds
/// the queue full is dropped and counted (outbox_telemetry_spans_dropped_total), as is a
/// batch the endpoint does not take (unreachable, slow past the timeout, or not 2xx).
/// Nothing is retried: an export failure never reaches event processing.
class SpanExporter {
public:
    struct Options {
        std::string endpoint;  // http://host:port/path (checked by the configuration)
        std::string service_name = "outboxd";
        std::string service_version;
        std::string instance_id;
        std::size_t queue_capacity = 4096;
        std::size_t batch_size = 512;
        std::chrono::milliseconds interval{1000};  // a partial batch leaves after this
        std::chrono::milliseconds timeout{5000};   // one export: resolve, connect, send, answer
    };

    SpanExporter(Options options, metrics::Metrics& metrics);

    /// Queues `span`, or drops and counts it when the queue is full. Thread-safe.
    void record(Span span) noexcept;
    /// Sends batches until `stop`; then one last export of what is queued, bounded by one
    /// second, and counts what is left as dropped.
    void run(std::stop_token stop);

    /// One export of `spans` (the body as encode_export_request() makes it); true on a 2xx.
    /// Ends within `timeout` or when `stop` is requested.
    [[nodiscard]] bool post(const std::vector<Span>& spans, std::chrono::milliseconds timeout,
                            std::stop_token stop) const;

private:
    Options options_;
    metrics::Metrics& metrics_;
    std::string host_;
    std::string port_;
    std::string target_;
    std::mutex mutex_;
    std::condition_variable_any ready_;
    std::vector<Span> queue_;
};

}  // namespace outbox::telemetry
