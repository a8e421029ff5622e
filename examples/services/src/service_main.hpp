#pragma once
// What the ai-classifier and admin-stats-server programs share: the fault flags and
// running a service until SIGINT or SIGTERM.

#include <csignal>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>
#include <pthread.h>

#include "outbox_examples/faulty_http_service.hpp"

namespace outbox::examples {

struct ServiceFlags {
    int port = 0;
    std::string latency = "0";
    long long stall_ms = 6000;
    FaultConfig faults;
};

inline void add_fault_flags(CLI::App& app, ServiceFlags& flags) {
    app.add_option("--latency-ms", flags.latency, "work time per request in ms: N or MIN-MAX")->capture_default_str();
    app.add_option("--rate-409", flags.faults.rate_409, "share of requests answered 409 Conflict")->capture_default_str();
    app.add_option("--rate-429", flags.faults.rate_429, "share answered 429 with Retry-After")->capture_default_str();
    app.add_option("--rate-500", flags.faults.rate_500, "share answered 500")->capture_default_str();
    app.add_option("--rate-503", flags.faults.rate_503, "share answered 503 with Retry-After")->capture_default_str();
    app.add_option("--rate-timeout", flags.faults.rate_timeout, "share stalled for --stall-ms without being processed")
        ->capture_default_str();
    app.add_option("--rate-lost-drop", flags.faults.rate_lost_drop,
                   "share processed, then the connection is dropped mid-response")
        ->capture_default_str();
    app.add_option("--rate-lost-late", flags.faults.rate_lost_late,
                   "share processed slowly (for --stall-ms), answered after the client gave up")
        ->capture_default_str();
    app.add_option("--stall-ms", flags.stall_ms, "how long stalls last; make it longer than the client timeout")
        ->capture_default_str();
    app.add_option("--retry-after", flags.faults.retry_after_seconds, "Retry-After seconds sent with 429 and 503")
        ->capture_default_str();
    app.add_option("--rate-limit", flags.faults.rate_limit_per_second,
                   "answer 429 to calls beyond this many in any second (0: no limit)")
        ->capture_default_str();
    app.add_option("--seed", flags.faults.seed, "seed of the random faults")->capture_default_str();
}

/// Applies --latency-ms and --stall-ms and validates the faults; throws CLI::ValidationError.
inline void finish_flags(ServiceFlags& flags) {
    const auto dash = flags.latency.find('-');
    try {
        std::size_t used = 0;
        const std::string low = flags.latency.substr(0, dash);
        const std::string high = dash == std::string::npos ? low : flags.latency.substr(dash + 1);
        flags.faults.latency_min = std::chrono::milliseconds{std::stoll(low, &used)};
        if (used != low.size()) throw std::invalid_argument("trailing text");
        flags.faults.latency_max = std::chrono::milliseconds{std::stoll(high, &used)};
        if (used != high.size()) throw std::invalid_argument("trailing text");
    } catch (const std::exception&) {
        throw CLI::ValidationError("--latency-ms", "expected N or MIN-MAX milliseconds, got " + flags.latency);
    }
    flags.faults.stall = std::chrono::milliseconds{flags.stall_ms};
    try {
        flags.faults.validate();
    } catch (const std::invalid_argument& e) {
        throw CLI::ValidationError("fault flags", e.what());
    }
}

/// Blocks SIGINT and SIGTERM in every thread (call before starting any), so that
/// wait_for_stop_signal() alone receives them.
inline sigset_t block_stop_signals() {
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    return signals;
}

inline void wait_for_stop_signal(const sigset_t& signals) {
    int received = 0;
    sigwait(&signals, &received);
}

}  // namespace outbox::examples
