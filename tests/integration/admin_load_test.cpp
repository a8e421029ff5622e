// Load on the admin API from one company's VIEWER must not make the host unready or block
// an ADMIN: 16 connections loop the event list for 30 s against 1,000,000 events (under
// AddressSanitizer, which looks for memory errors and not for plans: 10 s against 200,000).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "admin_support.hpp"
#include "support/test_host.hpp"

namespace outbox::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

#if defined(__SANITIZE_ADDRESS__)
constexpr int kEvents = 200000;
constexpr auto kLoadTime = 10s;
#else
constexpr int kEvents = 1000000;
constexpr auto kLoadTime = 30s;
#endif

class AdminLoad : public AdminApi {};

TEST_F(AdminLoad, SixteenViewersLoopingTheListLeaveReadyzAndRetriesServed) {
    db_.exec(R"SQL(
INSERT INTO event_publication (company_id, event_type, payload, status, occurred_at, updated_at, completed_at)
SELECT CASE WHEN g % 10 = 0 THEN 'globex' ELSE 'acme' END, 'TestRequested', '{}', 'COMPLETED',
       now() - g * interval '1 second', now(), now()
FROM generate_series(1, )SQL" + std::to_string(kEvents) + ") AS g");
    db_.exec("ANALYZE event_publication");
    const std::string id = review_event(db_);
    // Another company's viewers: acme's ADMIN must be served while globex holds every
    // connection it may (admin.db_connections_per_company).
    const std::string viewer = mint_hs256(token_claims("VIEWER", "globex"));

    std::atomic<bool> running{true};
    std::mutex mutex;
    std::vector<double> latencies_ms;
    std::map<int, int> statuses;
    std::vector<std::thread> viewers;
    for (int i = 0; i < 16; ++i) {
        viewers.emplace_back([&, i] {
            httplib::Client c("127.0.0.1", server_->port());
            c.set_keep_alive(true);
            c.set_read_timeout(20s);
            std::string cursor;
            std::vector<double> mine;
            std::map<int, int> seen;
            while (running) {
                const std::string path =
                    "/api/v1/admin/outbox-events?limit=50" + (cursor.empty() ? "" : "&cursor=" + cursor);
                const auto started = Clock::now();
                const auto res = c.Get(path.c_str(), bearer(viewer));
                mine.push_back(std::chrono::duration<double, std::milli>(Clock::now() - started).count());
                ++seen[res ? res->status : 0];
                // A client backs off on BUSY; refused at once, it would otherwise spin.
                if (res && res->status == 503) std::this_thread::sleep_for(20ms);
                // Every other connection pages deeper with the cursor.
                if (res && res->status == 200 && i % 2 == 1) {
                    const auto page = nlohmann::json::parse(res->body);
                    cursor = page["next_cursor"].is_string() ? page["next_cursor"].get<std::string>() : "";
                }
            }
            std::lock_guard lock(mutex);
            latencies_ms.insert(latencies_ms.end(), mine.begin(), mine.end());
            for (const auto& [status, n] : seen) statuses[status] += n;
        });
    }

    std::vector<std::string> probe_failures;
    int probes = 0;
    httplib::Client probe("127.0.0.1", server_->port());
    // The probe's own bound (probe_timeout 2 s + 1 s): later than that, load held it up.
    probe.set_read_timeout(3s);
    probe.set_connection_timeout(3s);
    bool retried = false;
    const auto end = Clock::now() + kLoadTime;
    while (Clock::now() < end) {
        const auto ready = probe.Get("/readyz");
        ++probes;
        if (!ready || ready->status != 200) {
            probe_failures.push_back(ready ? std::to_string(ready->status) + " " + ready->body : "no answer within 3 s");
        }
        if (!retried && Clock::now() > end - kLoadTime * 2 / 3) {  // a third in: under full load
            // A client retries 503 BUSY with the same key; the retry must get through.
            for (int attempt = 0; attempt < 10 && !retried; ++attempt) {
                const auto res =
                    post_retry(id, {{"expected_version", 4}, {"reason", "handler fixed in release 1.2.3"}}, "load-1");
                retried = res && res->status == 202;
                if (!retried) std::this_thread::sleep_for(200ms);
            }
            EXPECT_TRUE(retried) << "an ADMIN retry under load";
        }
        std::this_thread::sleep_for(200ms);
    }
    running = false;
    for (auto& t : viewers) t.join();

    std::sort(latencies_ms.begin(), latencies_ms.end());
    const auto at = [&](double q) {
        return latencies_ms.empty() ? 0.0 : latencies_ms[static_cast<std::size_t>(q * (latencies_ms.size() - 1))];
    };
    std::cout << "admin load: " << latencies_ms.size() << " list requests by 16 connections in "
              << kLoadTime.count() << " s against " << kEvents << " events; p50 " << at(0.5)
              << " ms, p99 " << at(0.99) << " ms; statuses:";
    for (const auto& [status, n] : statuses) std::cout << ' ' << status << "x" << n;
    std::cout << "; " << probes << " /readyz probes" << std::endl;

    EXPECT_TRUE(probe_failures.empty()) << ::testing::PrintToString(probe_failures);
    EXPECT_TRUE(retried);
    EXPECT_GT(statuses[200], 0);
    EXPECT_EQ(db_.scalar("SELECT status FROM event_publication WHERE event_id = '" + id + "'"), "PENDING");
}

}  // namespace
}  // namespace outbox::test
