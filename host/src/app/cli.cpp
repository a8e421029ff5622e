#include "app/cli.hpp"

#include <iostream>

#include <CLI/CLI.hpp>

#include "app/commands.hpp"
#include "app/host.hpp"
#include "app/plugin_template.hpp"
#include "app/plugins_check.hpp"
#include "config/config.hpp"
#include "db/migrator.hpp"
#include "log/log.hpp"

namespace outbox::app {

int run_cli(int argc, char** argv, const AdminFactory& admin) {
    CLI::App app{"outboxd: transactional-outbox worker runtime for PostgreSQL"};
    app.require_subcommand(1);
    app.set_version_flag("--version", std::string("outboxd ") + OUTBOXD_VERSION + " (needs database schema version " +
                                          std::to_string(db::Migrator().latest_version()) + ")");
    std::string config_path;
    app.add_option("-c,--config", config_path, "YAML configuration file (default: defaults and OUTBOX_* environment)")
        ->check(CLI::ExistingFile);

    auto* run = app.add_subcommand("run", "process events until SIGTERM/SIGINT");
    bool migrate_first = false;
    run->add_flag("--migrate", migrate_first, "apply pending migrations before starting");
    auto* migrate = app.add_subcommand("migrate", "apply pending schema migrations");
    db::RoleNames roles;
    migrate->add_option("--runtime-role", roles.runtime,
                        "existing role `outboxd run` connects as; granted exactly what the runtime needs");
    migrate->add_option("--publisher-role", roles.publisher,
                        "existing role publishers connect as; granted EXECUTE on outbox_publish and outbox_publish_many only");
    bool offline = false;
    migrate->add_flag("--offline", offline,
                      "apply migrations that are not online even while hosts of an older release are live "
                      "(refused otherwise, exit code 4)");
    std::string require_registered_types;
    const auto add_require_flag = [&require_registered_types](CLI::App* command) {
        command
            ->add_option("--require-registered-types", require_registered_types,
                         "true or false: set the database-wide check outbox_publish() makes (left as it is when "
                         "omitted; only this flag can switch it off, and each change is audited)")
            ->check(CLI::IsMember({"true", "false"}));
    };
    add_require_flag(migrate);
    auto* status = app.add_subcommand("status", "show backlog, unhandled event types and events needing review");
    auto* plugins = app.add_subcommand("plugins", "inspect plugin files");
    plugins->require_subcommand(1);
    auto* check = plugins->add_subcommand("check", "load every plugin in DIR and report OK or the reason it is refused");
    std::string check_dir;
    check->add_option("DIR", check_dir, "plugin directory")->required();
    auto* new_plugin = app.add_subcommand("new-plugin", "write a plugin folder (CMake, handler, README, GoogleTest) to start from");
    std::string new_plugin_name;
    std::string new_plugin_dir;
    new_plugin->add_option("NAME", new_plugin_name, "the handler name, e.g. acme-mailer")->required();
    new_plugin->add_option("--dir", new_plugin_dir, "the folder to create (must not exist or be empty)")->required();
    auto* retry = app.add_subcommand(
        "retry", "re-drive one REVIEW_REQUIRED event, or a group of them (as the admin API's retries do)");
    RetryArgs retry_args;
    retry->add_option("EVENT_ID", retry_args.event_id, "the event's id (omit to re-drive a group by --event-type/--code)");
    retry->add_option("--expected-version", retry_args.expected_version,
                      "one event: its version as you last read it");
    retry->add_option("--reason", retry_args.reason, "why it is safe to retry now (10 to 300 characters)")->required();
    retry->add_option("--idempotency-key", retry_args.idempotency_key,
                      "a key unique to this decision; repeating the command with it does nothing twice "
                      "(required for one event; for a group a new one is made and printed when omitted)");
    retry->add_option("--event-type", retry_args.event_type, "group: REVIEW_REQUIRED events of this type");
    retry->add_option("--code", retry_args.code, "group: ... whose last_error_code is this");
    retry->add_option("--before", retry_args.before, "group: ... that occurred before this RFC 3339 time");
    retry->add_option("--limit", retry_args.limit, "group: at most this many, oldest first (1 to 1000, default 100)");

    auto* handlers = app.add_subcommand("handlers", "pause or resume a handler on every host");
    handlers->require_subcommand(1);
    std::string handler_name;
    auto* pause = handlers->add_subcommand("pause", "stop calling handler NAME on every host; its events wait");
    pause->add_option("NAME", handler_name, "the handler's name")->required();
    auto* resume = handlers->add_subcommand("resume", "call handler NAME again on every host");
    resume->add_option("NAME", handler_name, "the handler's name")->required();

    auto* event_types = app.add_subcommand("event-types", "the event-type registry outbox_publish() checks");
    event_types->require_subcommand(1);
    std::string registry_file;
    auto* apply = event_types->add_subcommand("apply", "apply a registry file (idempotent; prints what changed)");
    apply->add_option("FILE", registry_file, "YAML: event_types: {Type: {fields: {name: {type: ...}}}}")->required();
    add_require_flag(apply);
    auto* list = event_types->add_subcommand("list", "show the registered event types");
    std::string list_format = "text";
    list->add_option("--format", list_format, "text or json")->check(CLI::IsMember({"text", "json"}));

    auto* config_command = app.add_subcommand("config", "configuration tools");
    config_command->require_subcommand(1);
    auto* reference = config_command->add_subcommand(
        "reference", "print the configuration reference (every key, its variable, type, default) in Markdown");
    // The config option is accepted after the subcommand as well.
    for (auto* sub : {run, migrate, status, check, retry, pause, resume, apply, list}) {
        sub->add_option("-c,--config", config_path, "YAML configuration file")->check(CLI::ExistingFile);
    }

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? 0 : 2;
    }
    // Documentation of the settings table: no configuration is read, so it is the same
    // whatever the environment holds.
    if (*reference) {
        std::cout << config::config_reference_markdown();
        return 0;
    }

    // Needs neither configuration nor database.
    if (*new_plugin) return new_plugin_command(new_plugin_name, new_plugin_dir, std::cout, std::cerr);

    config::Config config;
    try {
        config = config::load_config(config_path.empty() ? std::nullopt : std::optional<std::string>(config_path),
                                     config::process_environment());
    } catch (const config::ConfigError& e) {
        std::cerr << "outboxd: config error: " << e.what() << "\n";
        return 2;
    }
    // The secret now lives in `config` only; every command after this point may load
    // plugins (run, plugins check), which run in-process.
    config::remove_secret_from_environment();
    log::init(config.log.level, config.log.format);
    db::configure_connections(connection_settings_of(config, "outboxd " + app.get_subcommands().front()->get_name()));

    if (*run) return run_command(config, migrate_first, admin);
    const std::optional<bool> require_flag =
        require_registered_types.empty() ? std::nullopt : std::optional<bool>(require_registered_types == "true");
    if (*migrate) return migrate_command(config, roles, offline, require_flag);
    if (*status) return status_command(config);
    if (*retry) return retry_command(config, retry_args);
    if (*pause) return handlers_command(config, true, handler_name);
    if (*resume) return handlers_command(config, false, handler_name);
    if (*apply) return event_types_apply_command(config, registry_file, require_flag);
    if (*list) return event_types_list_command(config, list_format);
    if (*check) {
        plugin::HandlerConfigs configs;
        for (const auto& [name, settings] : config.handlers) configs[name] = settings.config_json;
        return plugins_check(check_dir, configs, std::cout, !config_path.empty());
    }
    return 2;
}

}  // namespace outbox::app
