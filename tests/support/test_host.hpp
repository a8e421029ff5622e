#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "app/host.hpp"
#include "dispatch/runtime.hpp"
#include "metrics/metrics.hpp"
#include "plugin/plugin_loader.hpp"
#include "support/temp_dir.hpp"

namespace outbox::test {

/// Options for an in-process test host: short poll, lease and backoff so tests run fast.
dispatch::RuntimeOptions fast_options(const std::string& database_url, const std::string& host_id);

/// A worker host running in the test process, built by the same composition root as
/// `outboxd run` (app::Host): the plugin files are deployed into a plugin directory of its
/// own and loaded from there, with the watcher, fleet registry and retention running; only
/// the admin listener is off. A real database.
class TestHost {
public:
    /// `settings` (by handler name) replaces the default settings of a handler entirely;
    /// otherwise a handler gets `handler_timeout` (as outbox.handler_timeout) and its entry
    /// in `configs`. Throws when a plugin file is refused.
    TestHost(dispatch::RuntimeOptions options, const std::vector<std::string>& plugin_files,
             const plugin::HandlerConfigs& configs = {}, std::chrono::milliseconds handler_timeout = std::chrono::seconds{30},
             const std::map<std::string, config::HandlerSettings>& settings = {});
    /// The configuration the host runs with; change it before start().
    explicit TestHost(config::Config config, const std::vector<std::string>& plugin_files = {});
    ~TestHost();

    void start();
    /// Returns false when handler threads never returned.
    bool stop();
    [[nodiscard]] metrics::Metrics& metrics() noexcept { return host_->metrics(); }
    /// The handlers the host routes to (after start()).
    [[nodiscard]] const routing::HandlerSet& handlers() const { return *handlers_; }
    [[nodiscard]] dispatch::Runtime& runtime() { return *host_->runtime(); }
    [[nodiscard]] const std::filesystem::path& plugin_dir() const noexcept { return plugin_dir_.path(); }

private:
    TempDir plugin_dir_;
    config::Config config_;
    std::size_t expected_plugins_ = 0;
    std::string incarnation_;  // from the runtime options, when given them
    std::unique_ptr<app::Host> host_;
    std::shared_ptr<const routing::HandlerSet> handlers_;
};

/// The environment of an `outboxd run` child in tests: `plugin_dir`, short lease, poll and
/// backoff, no admin listener, a 10s shutdown timeout.
std::map<std::string, std::string> outboxd_env(const std::string& database_url, const std::filesystem::path& plugin_dir);

/// Polls `condition` every 20ms until it holds or `timeout` passes; returns the last result.
bool wait_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout);

/// Creates the table the scripted fixture writes its ctx.db() effects into.
void create_scripted_effect_table(const std::string& database_url);

/// When each scripted effect row was written (epoch seconds, ascending): the end of its call.
std::vector<double> scripted_effect_times(const std::string& database_url);

/// The most calls of `call` seconds each in flight at once, given when each ended: calls
/// overlap when one ends while another, begun `call` seconds before its own end, still runs.
int worst_call_overlap(const std::vector<double>& ends, double call);

/// Publishes `count` events of `event_type` with `payload_json` through outbox_publish(),
/// in transactions of up to 1000; returns their ids.
std::vector<std::string> publish_many(const std::string& database_url, const std::string& event_type,
                                      const std::string& payload_json, int count, const std::string& company = "acme");

}  // namespace outbox::test
