#pragma once

#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

namespace outbox::service {

/// A long-running part of the host (scheduler, heartbeat, plugin watcher, ...): run() is
/// called on a thread of its own and returns once `stop` is requested. Started and
/// stopped by a ServiceGroup.
class Service {
public:
    virtual ~Service() = default;
    /// For logs and thread names.
    [[nodiscard]] virtual std::string name() const = 0;
    virtual void run(std::stop_token stop) = 0;
};

/// A Service made of a name and a function.
std::unique_ptr<Service> make_service(std::string name, std::function<void(std::stop_token)> run);

/// Services started in the order added, each on its own thread, and stopped in reverse:
/// stop requests every service's stop (last started first), then joins them in the same
/// order, so services that take a while to leave do so concurrently. Not thread-safe: one
/// owner starts and stops it.
class ServiceGroup {
public:
    ServiceGroup() = default;
    ~ServiceGroup() { stop(); }
    ServiceGroup(const ServiceGroup&) = delete;
    ServiceGroup& operator=(const ServiceGroup&) = delete;

    /// Starts `service` now, after those already started.
    void start(std::unique_ptr<Service> service);
    void start(std::string name, std::function<void(std::stop_token)> run) {
        start(make_service(std::move(name), std::move(run)));
    }
    /// Asks every service to stop, last started first, without waiting.
    void request_stop() noexcept;
    /// request_stop(), then waits for every service to return, last started first. Idempotent.
    void stop() noexcept;

private:
    struct Running {
        std::unique_ptr<Service> service;
        std::jthread thread;
    };
    std::vector<Running> running_;
};

}  // namespace outbox::service
