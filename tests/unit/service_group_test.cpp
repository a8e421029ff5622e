#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "service/service.hpp"

namespace outbox::service {
namespace {

TEST(ServiceGroup, StartsServicesInOrderAndStopsThemInReverse) {
    std::mutex mutex;
    std::vector<std::string> events;
    const auto record = [&](const std::string& event) {
        std::lock_guard lock(mutex);
        events.push_back(event);
    };
    ServiceGroup group;
    for (const std::string name : {"a", "b", "c"}) {
        auto started = std::make_shared<std::promise<void>>();
        auto running = started->get_future();
        group.start(name, [&record, name, started](std::stop_token stop) {
            std::atomic<bool> recorded{false};
            // Runs on the stopping thread, inside request_stop: the order of the requests.
            const std::stop_callback on_stop(stop, [&record, &recorded, name] {
                record("stop " + name);
                recorded = true;
                recorded.notify_all();
            });
            record("start " + name);
            started->set_value();
            std::mutex wait_mutex;
            std::condition_variable_any cv;
            std::unique_lock lock(wait_mutex);
            cv.wait(lock, stop, [] { return false; });
            // The request may wake this wait before it runs on_stop; destroying on_stop then
            // would deregister it unrun. Leave only once it has run.
            recorded.wait(false);
        });
        running.wait();
    }
    group.stop();
    EXPECT_EQ(events, (std::vector<std::string>{"start a", "start b", "start c", "stop c", "stop b", "stop a"}));
    group.stop();  // idempotent
}

TEST(ServiceGroup, AServiceKnowsItsName) {
    EXPECT_EQ(make_service("scheduler", [](std::stop_token) {})->name(), "scheduler");
}

}  // namespace
}  // namespace outbox::service
