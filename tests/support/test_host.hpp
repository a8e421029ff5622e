#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dispatch/runtime.hpp"
#include "metrics/metrics.hpp"
#include "plugin/plugin_loader.hpp"
#include "support/temp_dir.hpp"

namespace outbox::test {

/// Options for an in-process test host: short poll, lease and backoff so tests run fast.
dispatch::RuntimeOptions fast_options(const std::string& database_url, const std::string& host_id);

/// A worker host running in the test process: real plugin files loaded through the real
/// loader, the real runtime, a real database.
class TestHost {
public:
    /// `settings` (by handler name) replaces the default settings of a handler entirely;
    /// otherwise a handler gets `handler_timeout` and its entry in `configs`.
    TestHost(dispatch::RuntimeOptions options, const std::vector<std::string>& plugin_files,
             const plugin::HandlerConfigs& configs = {}, std::chrono::milliseconds handler_timeout = std::chrono::seconds{30},
             const std::map<std::string, config::HandlerSettings>& settings = {});
    ~TestHost();

    void start() { runtime_->start(); }
    bool stop() { return runtime_->stop(); }
    [[nodiscard]] metrics::Metrics& metrics() noexcept { return metrics_; }
    [[nodiscard]] const dispatch::HandlerSet& handlers() const noexcept { return *handlers_; }

private:
    TempDir private_dir_;
    metrics::Metrics metrics_;
    std::shared_ptr<const dispatch::HandlerSet> handlers_;
    std::unique_ptr<dispatch::Runtime> runtime_;
};

/// Polls `condition` every 20ms until it holds or `timeout` passes; returns the last result.
bool wait_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout);

/// Creates the table the scripted fixture writes its ctx.db() effects into.
void create_scripted_effect_table(const std::string& database_url);

/// Publishes `count` events of `event_type` with `payload_json` through outbox_publish(),
/// in transactions of up to 1000; returns their ids.
std::vector<std::string> publish_many(const std::string& database_url, const std::string& event_type,
                                      const std::string& payload_json, int count, const std::string& company = "acme");

}  // namespace outbox::test
