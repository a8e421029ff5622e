#include "service/service.hpp"

namespace outbox::service {
namespace {

class FunctionService final : public Service {
public:
    FunctionService(std::string name, std::function<void(std::stop_token)> run)
        : name_(std::move(name)), run_(std::move(run)) {}
    [[nodiscard]] std::string name() const override { return name_; }
    void run(std::stop_token stop) override { run_(std::move(stop)); }

private:
    std::string name_;
    std::function<void(std::stop_token)> run_;
};

}  // namespace

std::unique_ptr<Service> make_service(std::string name, std::function<void(std::stop_token)> run) {
    return std::make_unique<FunctionService>(std::move(name), std::move(run));
}

void ServiceGroup::start(std::unique_ptr<Service> service) {
    Service& started = *service;
    running_.push_back({std::move(service), {}});
    running_.back().thread = std::jthread([&started](std::stop_token stop) { started.run(std::move(stop)); });
}

void ServiceGroup::request_stop() noexcept {
    for (auto it = running_.rbegin(); it != running_.rend(); ++it) it->thread.request_stop();
}

void ServiceGroup::stop() noexcept {
    request_stop();
    for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
        if (it->thread.joinable()) it->thread.join();
    }
    running_.clear();
}

}  // namespace outbox::service
