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
#include "plugin/plugin_loader.hpp"

namespace outbox::app {
namespace {

plugin::HandlerConfigs handler_configs(const config::Config& config) {
    plugin::HandlerConfigs configs;
    for (const auto& [name, settings] : config.handlers) configs[name] = settings.config_json;
    return configs;
}

std::shared_ptr<const dispatch::HandlerSet> load_handlers(const config::Config& config, plugin::PluginLoader& loader,
                                                          metrics::Metrics& metrics) {
    plugin::DirectoryLoad loaded = plugin::load_directory(loader, config.plugins.dir, handler_configs(config));
    for (const auto& rejected : loaded.rejected) {
        log::error("plugin rejected: " + rejected.reason, {.file = rejected.file.string()});
    }
    metrics.plugin_load_failures(loaded.rejected.size());
    std::vector<dispatch::HandlerEntry> entries;
    for (auto& plugin : loaded.loaded) {
        std::string types;
        for (const auto& type : plugin.event_types) types += (types.empty() ? "" : ",") + type;
        log::info("plugin loaded: handler " + plugin.handler_name + " for " + types + ", ABI " + plugin.abi,
                  {.handler = plugin.handler_name, .file = plugin.file.string()});
        entries.push_back(dispatch::HandlerEntry{plugin.handler_name, plugin.event_types, plugin.handler,
                                                 config.handler(plugin.handler_name), plugin.file});
    }
    for (const auto& [name, settings] : config.handlers) {
        const bool present = std::any_of(entries.begin(), entries.end(), [&](const auto& e) { return e.name == name; });
        if (!present) log::warn("config has a section for handler " + name + " but no plugin provides it");
    }
    if (entries.empty()) log::warn("no handler plugins loaded from " + config.plugins.dir + ": this host claims nothing");
    return std::make_shared<const dispatch::HandlerSet>(std::move(entries));
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
    plugin::PluginLoader loader(private_dir.path());
    auto handlers = load_handlers(config, loader, metrics);

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
    db::OutageLog retention_outage;
    std::jthread retention([&config, &retention_outage](std::stop_token stop) {
        lease::Retention(config.outbox.retention).run(config.database.url, retention_outage, std::chrono::minutes{1}, stop);
    });
    log::info("outboxd " OUTBOXD_VERSION " started as " + host_id + " with " +
              std::to_string(handlers->entries().size()) + " handler(s), concurrency " +
              std::to_string(config.outbox.concurrency));

    int received = 0;
    sigwait(&signals, &received);
    log::info(std::string("received ") + (received == SIGTERM ? "SIGTERM" : "SIGINT") +
              ": stopping claims and draining in-flight work");
    retention.request_stop();
    retention.join();
    const bool clean = runtime->stop();
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
