#include "driver.hpp"

#include <chrono>
#include <iostream>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace outbox::examples::app {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kErrorsPrinted = 5;

// Sleeps until `until` in short steps so a stop request is noticed quickly.
bool sleep_until(Clock::time_point until, const std::atomic<bool>& stop) {
    while (Clock::now() < until) {
        if (stop) return false;
        std::this_thread::sleep_for(std::min<Clock::duration>(until - Clock::now(), std::chrono::milliseconds{100}));
    }
    return !stop;
}

}  // namespace

PaceResult run_paced(const std::string& database_url, const PaceOptions& options,
                     const std::function<void(long long, pqxx::connection&)>& job, const std::atomic<bool>& stop) {
    std::atomic<long long> next{0}, done{0}, failed{0};
    std::mutex print_mutex;
    const auto start = Clock::now();
    const auto worker = [&] {
        std::unique_ptr<pqxx::connection> conn;
        while (!stop) {
            const long long index = next++;
            if (index >= options.count) return;
            if (options.rate > 0) {
                const auto due = start + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(static_cast<double>(index) / options.rate));
                if (!sleep_until(due, stop)) return;
            }
            try {
                if (!conn || !conn->is_open()) conn = std::make_unique<pqxx::connection>(database_url);
                job(index, *conn);
                ++done;
            } catch (const std::exception& e) {
                if (++failed <= kErrorsPrinted) {
                    const std::lock_guard lock(print_mutex);
                    std::cerr << "job " << index << " failed: " << e.what() << "\n";
                }
                conn.reset();  // reconnect: the failure may have broken the session
                sleep_until(Clock::now() + std::chrono::milliseconds{200}, stop);
            }
        }
    };
    std::vector<std::thread> threads;
    for (int i = 0; i < std::max(1, options.concurrency); ++i) threads.emplace_back(worker);
    for (auto& thread : threads) thread.join();
    return PaceResult{done, failed};
}

}  // namespace outbox::examples::app
