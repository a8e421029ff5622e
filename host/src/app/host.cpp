#include "app/host.hpp"

#include <algorithm>
#include <limits>

#include <pqxx/pqxx>

#include "app/host_identity.hpp"
#include "app/plugin_routing.hpp"
#include "app/systemd_notifier.hpp"
#include "db/db_error.hpp"
#include "db/db_session.hpp"
#include "db/migrator.hpp"
#include "db/perform.hpp"
#include "db/role_rights.hpp"
#include "fleet/fleet_registry.hpp"
#include "lease/lease_store.hpp"
#include "lease/retention.hpp"
#include "log/log.hpp"
#include "operations/backlog_query.hpp"
#include "operations/operation_job.hpp"
#include "operations/operation_runner.hpp"
#include "plugin/plugin_directory.hpp"
#include "plugin/plugin_watcher.hpp"

namespace outbox::app {
namespace {

plugin::HandlerConfigs handler_configs(const config::Config& config) {
    plugin::HandlerConfigs configs;
    for (const auto& [name, settings] : config.handlers) configs[name] = settings.config_json;
    return configs;
}

void warn_about_unused_sections(const config::Config& config, const routing::HandlerSet& handlers) {
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

// Returns the database's schema version, which this host has found compatible.
int check_schema(pqxx::connection& conn, bool migrate_first, std::chrono::milliseconds lock_wait) {
    const db::Migrator migrator;
    const std::string self = "this outboxd " OUTBOXD_VERSION;
    try {
        if (migrate_first) {
            const db::MigrateOptions options{.allow_offline = false, .lock_wait = lock_wait};
            for (const auto& applied : migrator.migrate(conn, {}, options)) {
                log::info("applied migration " + applied.file_name);
            }
        }
        const db::SchemaStatus status = migrator.status(conn);
        if (!status.pending.empty()) {
            throw StartError(1, "the database schema is at version " + std::to_string(status.applied_version) + " but " +
                                    self + " needs version " + std::to_string(status.latest_version) +
                                    ": run `outboxd migrate` with this release first, as the schema's owner (`outboxd run "
                                    "--migrate` does it too, but then this host needs the owner's rights)");
        }
        // A contracting migration declares the oldest host schema that still works with it.
        if (status.hosts_from > status.latest_version) {
            throw StartError(1, "the database schema is at version " + std::to_string(status.applied_version) +
                                    " and needs hosts of schema " + std::to_string(status.hosts_from) +
                                    " or newer, but " + self + " is a host of schema " +
                                    std::to_string(status.latest_version) +
                                    ": upgrade this host to a release that supports schema " +
                                    std::to_string(status.applied_version));
        }
        return status.applied_version;
    } catch (const db::MigrationError& e) {
        throw StartError(1, e.what());
    } catch (const StartError&) {
        throw;
    } catch (const std::exception&) {
        const db::DbFailure failure = db::classify_db_error(std::current_exception());
        if (failure.kind == db::DbFailureKind::ConnectionBroken) throw;  // start-up starts over
        throw StartError(1, "cannot check the database schema: " + failure.describe() +
                                "; check database.url / OUTBOX_DATABASE_URL");
    }
}

// Plugins, ctx.db() and the admin API all run with database.url's rights; a role that can
// change the schema or disable the append-only triggers is more than a host needs.
void check_least_privilege(pqxx::connection& conn, bool required) {
    std::optional<db::ExcessRights> excess;
    try {
        pqxx::read_transaction tx(conn);
        excess = db::excess_rights(tx, "", false);
    } catch (const std::exception&) {
        const db::DbFailure failure = db::classify_db_error(std::current_exception());
        if (failure.kind == db::DbFailureKind::ConnectionBroken) throw;  // start-up starts over
        throw StartError(1, "cannot check the database role's rights: " + failure.describe() +
                                "; check database.url / OUTBOX_DATABASE_URL");
    }
    if (!excess) return;
    const std::string problem = "database.url connects as " + excess->describe() +
                                ", so plugins, ctx.db() and the admin API could change the schema and rewrite the "
                                "audit; connect as a runtime role granted by `outboxd migrate --runtime-role` "
                                "(docs/security.md, \"Database roles\")";
    if (required) throw StartError(2, "config error: database.require_least_privilege is true and " + problem);
    log::warn(problem + "; database.require_least_privilege: true refuses to start like this");
}

// How often the STATUS= line is refreshed.
constexpr auto kStatusInterval = std::chrono::seconds{10};

/// The STATUS= line: handlers by name, then the backlog by status and its oldest age.
std::string status_line(const routing::HandlerSet& handlers, const std::optional<metrics::DbGauges>& gauges) {
    std::string line = std::to_string(handlers.entries().size()) + " handler(s)";
    for (std::size_t i = 0; i < handlers.entries().size(); ++i) {
        line += (i == 0 ? ": " : ", ") + handlers.entries()[i].name;
    }
    if (!gauges) return line + "; backlog unknown (database unreachable)";
    line += "; backlog";
    for (const auto& [status, count] : gauges->backlog) line += " " + status + "=" + std::to_string(count);
    return line + ", oldest " + std::to_string(static_cast<long long>(gauges->oldest_delay_seconds)) + "s";
}

}  // namespace

db::ConnectionSettings connection_settings_of(const config::Config& config, const std::string& application_name) {
    db::ConnectionSettings settings;
    settings.connect_timeout = config.database.connect_timeout;
    settings.keepalives_idle = config.database.keepalives_idle;
    settings.tcp_user_timeout = config.database.tcp_user_timeout;
    settings.call_timeout = config.database.call_timeout;
    settings.application_name = application_name;
    settings.transaction_pooled = config.database.pool_mode == "transaction";
    return settings;
}

std::string migration_url(const config::Config& config) {
    if (!config.database.session_url.empty()) return config.database.session_url;
    if (config.database.pool_mode == "transaction") {
        throw StartError(2, "config error: database.pool_mode is transaction, and migrations need a session of their own "
                            "(a session lock, a session search_path): set database.session_url / "
                            "OUTBOX_DATABASE_SESSION_URL to a direct connection");
    }
    return config.database.url;
}

std::unique_ptr<pqxx::connection> connect_at_start_up(const config::Config& config, std::stop_token stop,
                                                      const std::optional<std::string>& url,
                                                      std::optional<std::chrono::steady_clock::time_point> until) {
    const auto deadline = until.value_or(std::chrono::steady_clock::now() + config.database.startup_timeout);
    db::ReconnectBackoff backoff;
    bool said = false;
    bool bad_url = false;
    bool stopped = false;
    std::string problem;
    // Start-up waits for the database: any failure but a malformed URL is tried again after
    // a backoff until database.startup_timeout, saying so once.
    const db::RetryPolicy wait_for_the_database{
        std::numeric_limits<int>::max(), [&](const db::DbFailure& failure) {
            problem = failure.describe();
            if (bad_url || std::chrono::steady_clock::now() >= deadline) return false;
            if (!said) {
                log::warn("waiting for the database (" + problem + "); retrying for up to database.startup_timeout (" +
                          std::to_string(config.database.startup_timeout.count() / 1000) + "s)");
                said = true;
            }
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
            stopped = !db::sleep_for(std::clamp(backoff.next(), std::chrono::milliseconds{0}, left), stop);
            return !stopped;
        }};
    try {
        auto conn = db::perform(
            [&] {
                try {
                    return db::open_connection(url.value_or(config.database.url));
                } catch (const std::invalid_argument&) {
                    bad_url = true;
                    throw;
                }
            },
            wait_for_the_database);
        if (said) log::info("the database is reachable; starting");
        return conn;
    } catch (const std::invalid_argument& e) {
        throw StartError(2, std::string("config error: ") + e.what());
    } catch (...) {
        if (stopped) return nullptr;
        throw StartError(1, "cannot reach the database at start-up" +
                                std::string(said ? " within database.startup_timeout" : "") + ": " + problem +
                                "; check database.url / OUTBOX_DATABASE_URL");
    }
}

Host::Host(config::Config config, Options options)
    : config_(std::move(config)), options_(std::move(options)), host_id_(host_identity(config_.outbox.host_id)),
      incarnation_(options_.incarnation.empty() ? lease::new_incarnation() : options_.incarnation) {}

Host::~Host() {
    stop();
    if (threads_stuck_) {
        log::error("handler threads are still running and use this host's state: exiting with code 3");
        spdlog::default_logger_raw()->flush();
        std::_Exit(3);
    }
}

/// The start-up checks on the database: its schema (migrated first with --migrate), the
/// processing role's rights, and no live process under this host id. False when stopped.
/// A connection lost between the checks (the server or a pooler restarting while this host
/// starts) is waited out as an unreachable database is, until database.startup_timeout.
bool Host::check_database(std::stop_token stop) {
    const auto deadline = std::chrono::steady_clock::now() + config_.database.startup_timeout;
    db::ReconnectBackoff backoff;
    for (;;) {
        try {
            return check_database_once(stop, deadline);
        } catch (const StartError&) {
            throw;
        } catch (...) {
            const db::DbFailure failure = db::classify_db_error(std::current_exception());
            if (failure.kind != db::DbFailureKind::ConnectionBroken) throw;
            if (std::chrono::steady_clock::now() >= deadline) {
                throw StartError(1, "lost the database connection during start-up and could not start within "
                                    "database.startup_timeout: " + failure.describe());
            }
            log::warn("lost the database connection during start-up (" + failure.describe() + "); starting over");
            if (!db::sleep_for(backoff.next(), stop)) return false;
        }
    }
}

bool Host::check_database_once(std::stop_token stop, std::chrono::steady_clock::time_point deadline) {
    // Every connection of the start-up shares one database.startup_timeout.
    auto conn = connect_at_start_up(config_, stop,
                                    options_.migrate_first ? std::optional(migration_url(config_)) : std::nullopt,
                                    deadline);
    if (!conn) return false;
    schema_accepted_ = check_schema(*conn, options_.migrate_first, config_.database.startup_timeout);
    // The processing connection is database.url, whatever --migrate connected to.
    if (options_.migrate_first && !config_.database.session_url.empty()) {
        conn = connect_at_start_up(config_, stop, std::nullopt, deadline);
        if (!conn) return false;
    }
    check_least_privilege(*conn, config_.database.require_least_privilege);
    // Two processes under one host id would each take the other's leases for lost ones.
    auto twin = fleet::find_live_twin(*conn, host_id_, incarnation_, stop);
    if (twin.live) throw StartError(2, *twin.live);
    left_beat_ = std::move(twin.left_beat);
    return true;
}

/// The fleet registry, the plugin watcher and retention, each on a thread of its own.
void Host::start_services(const SettingsLookup& settings) {
    registry_service_.start("fleet registry", [this](std::stop_token token) { registry_->run(token); });
    // The watcher thread owns the plugin directory from here on.
    watcher_ = std::make_unique<plugin::PluginWatcher>(config_.plugins.dir, std::chrono::seconds{5}, [this, settings] {
        // A rescan asked for by SIGHUP ends with READY=1, however it ends.
        struct Reloaded {
            SystemdNotifier* notifier;
            ~Reloaded() {
                if (notifier) notifier->ready();
            }
        } reloaded{reload_pending_.exchange(false) ? options_.notifier : nullptr};
        const plugin::DirectoryChange change = plugins_->rescan();
        report_change(change, metrics_);
        if (!change.routing_changed()) return;
        runtime_->set_handlers(handler_set_from(plugins_->current(), settings));
        registry_->refresh();
    });
    services_.start("plugin watcher", [this](std::stop_token token) { watcher_->run(token); });
    watcher_ready_ = watcher_.get();
    // Every host works the fleet's operator jobs, whichever host or command started them.
    services_.start("operator jobs", [this](std::stop_token token) {
        operations::OperationRunner(config_.database.url, runtime_->outage(), std::chrono::seconds{1},
                                    operations::kOperationBatchSize)
            .run(token);
    });
    services_.start("retention", [this](std::stop_token token) {
        lease::Retention(config_.outbox.retention, lease::Retention::kBatch, config_.outbox.history_partition)
            .run(config_.database.url, runtime_->outage(), std::chrono::minutes{1}, token);
    });
}

bool Host::start(std::stop_token stop) {
    db::configure_connections(connection_settings_of(config_, "outboxd " + host_id_));

    // Read before anything else starts: an unreadable JWT key file is a configuration error.
    StartAdmin start_admin;
    if (config_.admin.listen_address && options_.admin) {
        try {
            start_admin = options_.admin(config_, host_id_);
        } catch (const config::ConfigError& e) {
            throw StartError(2, std::string("config error: ") + e.what());
        }
    }

    if (!check_database(stop)) return false;
    if (stop.stop_requested()) return false;
    prepare_attempt_partitions();

    private_dir_ = std::make_unique<PrivateDir>();
    plugins_ = std::make_unique<plugin::PluginDirectory>(config_.plugins.dir, private_dir_->path(), handler_configs(config_));
    report_change(plugins_->rescan(), metrics_);
    const SettingsLookup settings = [this](const std::string& name) { return config_.handler(name); };
    auto handlers = handler_set_from(plugins_->current(), settings);
    warn_about_unused_sections(config_, *handlers);
    if (stop.stop_requested()) return false;

    dispatch::RuntimeOptions runtime_options = dispatch::RuntimeOptions::from(config_, host_id_);
    runtime_options.incarnation = incarnation_;
    runtime_ = std::make_unique<dispatch::Runtime>(std::move(runtime_options), handlers, metrics_, options_.on_fatal,
                                                   options_.notifier);

    // The listener starts before any claim, so a host that cannot bind exits having done
    // nothing. It is independent of outbox.enabled: a host that claims nothing still serves.
    // It reads the runtime's current handlers, which may be replaced while it runs.
    if (start_admin) admin_server_ = start_admin(metrics_, [this] { return runtime_->handlers(); });
    if (stop.stop_requested()) return false;

    // The host's row is written before its first claim and its "started" line: a process
    // started under this id later finds it, one started at the same moment is refused.
    registry_ = std::make_unique<fleet::FleetRegistry>(
        fleet::FleetRegistry::Options{config_.database.url, host_id_, OUTBOXD_VERSION, config_.outbox.enabled,
                                      std::min<std::chrono::milliseconds>(std::chrono::seconds{5},
                                                                          config_.outbox.lease_duration / 3),
                                      std::chrono::hours{24}, [this] { return runtime_->abandoned_threads(); },
                                      db::Migrator().latest_version(), schema_accepted_, incarnation_},
        runtime_->outage(), runtime_->current_handlers());
    if (auto taken = registry_->announce(left_beat_)) throw StartError(2, *taken);
    runtime_->start();
    start_services(settings);
    log::info("outboxd " OUTBOXD_VERSION " (schema " + std::to_string(db::Migrator().latest_version()) +
              ", database at " + std::to_string(schema_accepted_) + ") started as " + host_id_ + " with " +
              std::to_string(handlers->entries().size()) + " handler(s), concurrency " +
              std::to_string(config_.outbox.concurrency));
    // READY=1 goes out with the first STATUS= line, from the status thread (only when a
    // supervisor listens: it queries the database every 10 s).
    if (options_.notifier && options_.notifier->enabled()) {
        services_.start("status", [this](std::stop_token token) { report_status(token); });
    }
    return true;
}

// The attempt history's partition for now exists before this host's first outcome: one
// created later, for a range other hosts already write into, would race their inserts
// (routed to the default partition meanwhile). Retention creates the next ones well ahead.
void Host::prepare_attempt_partitions() {
    try {
        auto conn = db::open_connection(config_.database.url);
        lease::Retention(config_.outbox.retention, lease::Retention::kBatch, config_.outbox.history_partition)
            .maintain_partitions(*conn, std::nullopt, true);
    } catch (const std::exception&) {
        const db::DbFailure failure = db::classify_db_error(std::current_exception());
        log::warn("could not prepare the attempt history's partitions now (" + failure.describe() +
                      "); the retention thread tries again every minute, and attempts go to the default partition "
                      "meanwhile",
                  {.code = "ATTEMPT_PARTITIONS"});
    }
}

void Host::report_status(std::stop_token stop) {
    SystemdNotifier& notifier = *options_.notifier;
    // A host that claims nothing has no scheduler loop to beat the watchdog: this thread
    // does, as often as the watchdog asks.
    auto interval = std::chrono::duration_cast<std::chrono::milliseconds>(kStatusInterval);
    const auto watchdog = notifier.max_idle_wait();
    if (!config_.outbox.enabled && watchdog) interval = std::min(interval, *watchdog);
    db::DbSession session(config_.database.url, "status", runtime_->outage());
    auto next_status = std::chrono::steady_clock::now();
    bool first = true;
    do {
        if (!config_.outbox.enabled && !first) notifier.beat();
        if (std::chrono::steady_clock::now() < next_status) continue;
        next_status = std::chrono::steady_clock::now() + kStatusInterval;
        const auto handlers = runtime_->handlers();
        std::optional<metrics::DbGauges> gauges;
        const auto bound = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::seconds{5});
        if (!session.run([&](pqxx::connection& conn) { gauges = operations::read_db_gauges(conn, *handlers, bound); }, stop,
                         bound + std::chrono::seconds{1})) {
            gauges.reset();
        }
        if (std::exchange(first, false)) {
            notifier.ready(status_line(*handlers, gauges));
        } else {
            notifier.status(status_line(*handlers, gauges));
        }
    } while (db::sleep_for(interval, stop));
}

void Host::rescan() {
    auto* watcher = watcher_ready_.load();
    if (!watcher) return;
    if (options_.notifier) {
        reload_pending_ = true;
        options_.notifier->reloading();
    }
    watcher->trigger();
}

int Host::stop() {
    if (stopped_) return exit_code_;
    stopped_ = true;
    watcher_ready_ = nullptr;
    registry_service_.request_stop();
    // Asked first, joined after the handlers: a service inside a database call that does not
    // answer must not delay the handlers' part of the stop.
    services_.request_stop();
    const bool handlers_clean = runtime_ ? runtime_->stop_handlers() : true;
    handlers_settled_ = (handlers_clean && !(runtime_ && runtime_->exhausted()) ? 0 : 3) |
                        (runtime_ && runtime_->outage().down() ? 0x100 : 0);
    services_.stop();
    const bool clean = runtime_ ? runtime_->stop() : true;
    registry_service_.stop();
    if (admin_server_) admin_server_->stop();
    exit_code_ = clean && !(runtime_ && runtime_->exhausted()) ? 0 : 3;
    threads_stuck_ = !clean;
    if (!clean) return exit_code_;  // keep everything alive for the stuck threads
    admin_server_.reset();
    watcher_.reset();
    registry_.reset();
    runtime_.reset();
    plugins_.reset();
    private_dir_.reset();
    return exit_code_;
}

}  // namespace outbox::app
