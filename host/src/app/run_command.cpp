#include <csignal>
#include <iostream>
#include <optional>
#include <thread>

#include <pthread.h>
#include <signal.h>

#include "admin/admin_server.hpp"
#include "app/commands.hpp"
#include "app/host_identity.hpp"
#include "db/connection_pool.hpp"
#include "db/migrator.hpp"
#include "dispatch/runtime.hpp"
#include "lease/retention.hpp"
#include "log/log.hpp"
#include "metrics/metrics.hpp"
#include "app/plugin_routing.hpp"
#include "fleet/fleet_registry.hpp"
#include "plugin/plugin_directory.hpp"
#include "plugin/plugin_watcher.hpp"

namespace outbox::app {
namespace {

plugin::HandlerConfigs handler_configs(const config::Config& config) {
    plugin::HandlerConfigs configs;
    for (const auto& [name, settings] : config.handlers) configs[name] = settings.config_json;
    return configs;
}

void warn_about_unused_sections(const config::Config& config, const dispatch::HandlerSet& handlers) {
    for (const auto& [name, settings] : config.handlers) {
        const auto& entries = handlers.entries();
        const bool present = std::any_of(entries.begin(), entries.end(), [&](const auto& e) { return e.name == name; });
        if (!present) log::warn("config has a section for handler " + name + " but no plugin provides it");
    }
    if (handlers.entries().empty()) {
        log::warn("no handler plugins loaded from " + config.plugins.dir +
                  ": this host claims nothing until a plugin is deployed there");
    }
}

bool schema_ready(const config::Config& config, bool migrate_first) {
    auto conn = db::open_connection(config.database.url);
    const db::Migrator migrator;
    if (migrate_first) {
        for (const auto& applied : migrator.migrate(*conn)) log::info("applied migration " + applied.file_name);
        return true;
    }
    const db::SchemaStatus status = migrator.status(*conn);
    if (!status.pending.empty()) {
        log::error("the database schema is at version " + std::to_string(status.applied_version) +
                   " but this outboxd needs version " + std::to_string(status.latest_version) +
                   ": run `outboxd migrate` (or `outboxd run --migrate`) first");
        return false;
    }
    return true;
}

}  // namespace

int run_command(const config::Config& config, bool migrate_first) {
    // Signals are taken by sigwait on this thread only; every thread started below
    // inherits the blocked mask.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);

    const std::string host_id = host_identity(config.outbox.host_id);
    // Read before anything else starts: an unreadable JWT key file is a configuration error.
    std::optional<admin::AdminOptions> admin_options;
    if (config.admin.listen != "off") {
        try {
            admin_options = admin::AdminOptions::from(config, host_id);
        } catch (const config::ConfigError& e) {
            std::cerr << "outboxd: config error: " << e.what() << "\n";
            return 2;
        }
    }

    try {
        if (!schema_ready(config, migrate_first)) return 1;
    } catch (const db::MigrationError& e) {
        log::error(e.what());
        return 1;
    } catch (const std::exception&) {
        log::error("cannot reach the database at start-up: " +
                   db::classify_db_error(std::current_exception()).describe() +
                   "; check database.url / OUTBOX_DATABASE_URL");
        return 1;
    }

    metrics::Metrics metrics;
    PrivateDir private_dir;
    plugin::PluginDirectory plugins(config.plugins.dir, private_dir.path(), handler_configs(config));
    report_change(plugins.rescan(), metrics);
    const SettingsLookup settings = [&config](const std::string& name) { return config.handler(name); };
    auto handlers = handler_set_from(plugins.current(), settings);
    warn_about_unused_sections(config, *handlers);

    auto runtime = std::make_unique<dispatch::Runtime>(dispatch::RuntimeOptions::from(config, host_id), handlers, metrics);

    // The listener starts before any claim, so a host that cannot bind exits having done
    // nothing. It is independent of outbox.enabled: a host that claims nothing still serves.
    // It reads the runtime's current handlers, which may be replaced while it runs.
    std::unique_ptr<admin::AdminServer> admin_server;
    if (admin_options) {
        try {
            admin_server = std::make_unique<admin::AdminServer>(
                *admin_options, metrics,
                admin::AdminServer::HandlerSource([&runtime] { return runtime->handlers(); }));
            admin_server->start();
        } catch (const admin::AdminStartError& e) {
            log::error(e.what());
            return 1;
        }
    }

    runtime->start();
    fleet::FleetRegistry registry({config.database.url, host_id, OUTBOXD_VERSION, config.outbox.enabled,
                                   std::min<std::chrono::milliseconds>(std::chrono::seconds{5},
                                                                       config.outbox.lease_duration / 3),
                                   std::chrono::hours{24}},
                                  runtime->outage(), runtime->current_handlers());
    std::jthread registry_thread([&registry](std::stop_token stop) { registry.run(stop); });
    // The watcher thread owns `plugins` from here on.
    plugin::PluginWatcher watcher(config.plugins.dir, std::chrono::seconds{5}, [&] {
        const plugin::DirectoryChange change = plugins.rescan();
        report_change(change, metrics);
        if (!change.routing_changed()) return;
        runtime->set_handlers(handler_set_from(plugins.current(), settings));
        registry.refresh();
    });
    std::jthread watcher_thread([&watcher](std::stop_token stop) { watcher.run(stop); });
    std::jthread retention([&config, &runtime](std::stop_token stop) {
        lease::Retention(config.outbox.retention).run(config.database.url, runtime->outage(), std::chrono::minutes{1}, stop);
    });
    log::info("outboxd " OUTBOXD_VERSION " started as " + host_id + " with " +
              std::to_string(handlers->entries().size()) + " handler(s), concurrency " +
              std::to_string(config.outbox.concurrency));

    int received = 0;
    while (sigwait(&signals, &received) == 0 && received == SIGHUP) {
        log::info("received SIGHUP: rescanning the plugin directory");
        watcher.trigger();
    }
    log::info(std::string("received ") + (received == SIGTERM ? "SIGTERM" : "SIGINT") +
              ": stopping claims and draining in-flight work");
    watcher_thread.request_stop();
    watcher_thread.join();
    retention.request_stop();
    retention.join();
    const bool clean = runtime->stop();
    registry_thread.request_stop();
    registry_thread.join();
    if (admin_server) admin_server->stop();
    log::info("outboxd stopped");
    spdlog::default_logger_raw()->flush();
    if (!clean) std::_Exit(0);  // detached handler threads still reference the runtime
    return 0;
}

int migrate_command(const config::Config& config) {
    try {
        auto conn = db::open_connection(config.database.url);
        const auto applied = db::Migrator().migrate(*conn);
        if (applied.empty()) std::cout << "schema is up to date\n";
        for (const auto& m : applied) {
            std::cout << "applied " << m.file_name << " in " << m.duration_ms << " ms\n";
        }
        return 0;
    } catch (const db::MigrationError& e) {
        std::cerr << "outboxd migrate: " << e.what() << "\n";
        return 1;
    } catch (const std::exception&) {
        std::cerr << "outboxd migrate: cannot reach the database: "
                  << db::classify_db_error(std::current_exception()).describe()
                  << "; check database.url / OUTBOX_DATABASE_URL\n";
        return 1;
    }
}

}  // namespace outbox::app
