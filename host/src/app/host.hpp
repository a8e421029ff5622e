#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>

#include "app/admin_listener.hpp"
#include "config/config.hpp"
#include "db/connect.hpp"
#include "dispatch/runtime.hpp"
#include "metrics/metrics.hpp"
#include "service/service.hpp"

namespace outbox::fleet {
class FleetRegistry;
}
namespace outbox::plugin {
class PluginDirectory;
class PluginWatcher;
}

namespace outbox::app {

class PrivateDir;
class SystemdNotifier;

/// A start-up failure: the exit code (1, or 2 for a configuration error) and one line.
class StartError : public std::runtime_error {
public:
    StartError(int exit_code, const std::string& message) : std::runtime_error(message), exit_code_(exit_code) {}
    [[nodiscard]] int exit_code() const noexcept { return exit_code_; }

private:
    int exit_code_;
};

/// The connection settings of `config` (database.*), naming the process `application_name`.
db::ConnectionSettings connection_settings_of(const config::Config& config, const std::string& application_name);

/// Opens a connection, retrying with backoff while the server cannot be reached (one log
/// line says the host is waiting), until `deadline` (by default database.startup_timeout from
/// now). Returns nullptr when `stop` was requested meanwhile; throws StartError(1) when the
/// time is up.
std::unique_ptr<pqxx::connection> connect_at_start_up(
    const config::Config& config, std::stop_token stop, const std::optional<std::string>& url = std::nullopt,
    std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);

/// The connection migrations run on: they hold a session advisory lock and set the
/// session's search_path, so behind a transaction-mode pooler they need
/// database.session_url (a direct connection). Throws StartError(2) when it is missing then.
std::string migration_url(const config::Config& config);

/// The composition root: everything `outboxd run` runs, built and stopped in one order
/// (docs/design.md, "Starting and stopping a host"). The test harness builds its hosts with
/// it too, so tests exercise production wiring.
class Host {
public:
    struct Options {
        bool migrate_first = false;
        /// Called (from an internal thread) when the host must stop on its own: more
        /// handler threads are stuck than outbox.max_abandoned_threads allows.
        std::function<void()> on_fatal;
        /// Told READY/STATUS/RELOADING and fed by the scheduler's loop (optional; must
        /// outlive the host).
        SystemdNotifier* notifier = nullptr;
        /// Builds the admin listener when admin.listen is not off (empty: no listener).
        AdminFactory admin;
        /// This process's incarnation (empty: drawn at random, as `outboxd run` does).
        std::string incarnation{};
    };

    Host(config::Config config, Options options);
    ~Host();
    Host(const Host&) = delete;
    Host& operator=(const Host&) = delete;

    /// Returns false when `stop` was requested during start-up (nothing is left running).
    /// Throws StartError.
    bool start(std::stop_token stop);
    /// Rescans the plugin directory now (SIGHUP): RELOADING=1, then READY=1 once that rescan
    /// is done. Safe from any thread, also during start() (then the first scan covers it).
    void rescan();
    /// Stops everything; returns the process exit code: 0, or 3 when handler threads never
    /// returned (or too many were abandoned). After 3 the caller must end the process
    /// without destroying this host: those threads still use it.
    int stop();
    /// During stop(), once the handlers are done: the process' exit code (0, or 3 when a
    /// handler thread had to be abandoned) and whether the database was unreachable then;
    /// empty while handlers may still run. What stop() does after that only waits for the
    /// database, which `outboxd run` bounds.
    struct HandlersSettled {
        int exit_code;
        bool database_down;
    };
    [[nodiscard]] std::optional<HandlersSettled> handlers_settled() const noexcept {
        const int state = handlers_settled_.load();
        if (state < 0) return std::nullopt;
        return HandlersSettled{state & 0xff, (state & 0x100) != 0};
    }

    [[nodiscard]] const std::string& host_id() const noexcept { return host_id_; }
    [[nodiscard]] metrics::Metrics& metrics() noexcept { return metrics_; }
    /// Null before start().
    [[nodiscard]] dispatch::Runtime* runtime() noexcept { return runtime_.get(); }

private:
    bool check_database(std::stop_token stop);
    bool check_database_once(std::stop_token stop, std::chrono::steady_clock::time_point deadline);
    void start_services(const std::function<config::HandlerSettings(const std::string&)>& settings);
    /// Sends the STATUS= line every 10 s (and beats the watchdog when nothing claims).
    void report_status(std::stop_token stop);
    void prepare_attempt_partitions();

    config::Config config_;
    Options options_;
    std::string host_id_;
    std::string incarnation_;  // this process's: its leases and its outbox_host row carry it
    int schema_accepted_ = 0;  // the database's schema version, checked at start
    metrics::Metrics metrics_;
    std::unique_ptr<PrivateDir> private_dir_;
    std::unique_ptr<plugin::PluginDirectory> plugins_;
    std::unique_ptr<dispatch::Runtime> runtime_;
    std::unique_ptr<AdminListener> admin_server_;
    std::string left_beat_;  // the heartbeat of a dead twin's row the start-up check saw
    std::unique_ptr<fleet::FleetRegistry> registry_;
    std::unique_ptr<plugin::PluginWatcher> watcher_;
    std::atomic<plugin::PluginWatcher*> watcher_ready_{nullptr};
    // The registry is asked to stop first and joined last: its last write (the host's row
    // marked stopped) runs while the runtime drains.
    service::ServiceGroup registry_service_;
    service::ServiceGroup services_;  // plugin watcher, retention, STATUS= reports
    std::atomic<bool> reload_pending_{false};
    bool stopped_ = false;
    bool threads_stuck_ = false;
    std::atomic<int> handlers_settled_{-1};
    int exit_code_ = 0;
};

}  // namespace outbox::app
