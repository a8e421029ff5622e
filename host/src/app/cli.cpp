#include "app/cli.hpp"

#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "app/commands.hpp"
#include "app/host.hpp"
#include "app/plugin_template.hpp"
#include "app/plugins_check.hpp"
#include "config/config.hpp"
#include "db/migrator.hpp"
#include "operations/operation_job.hpp"
#include "log/log.hpp"

namespace outbox::app {

namespace {

/// The parsed command line: every option's value, and each command to test whether it ran.
struct CommandLine {
    std::string config_path;
    bool migrate_first = false;
    db::RoleNames roles;
    bool offline = false;
    std::string require_registered_types;
    std::string check_dir;
    std::string new_plugin_name;
    std::string new_plugin_dir;
    RetryArgs retry_args;
    OperationArgs operation_args;
    std::string operation_id;
    std::string event_id;
    std::string handler_name;
    std::string registry_file;
    std::string list_format = "text";
    CLI::App* run = nullptr;
    CLI::App* migrate = nullptr;
    CLI::App* status = nullptr;
    CLI::App* check = nullptr;
    CLI::App* new_plugin = nullptr;
    CLI::App* retry = nullptr;
    CLI::App* pause = nullptr;
    CLI::App* resume = nullptr;
    CLI::App* apply = nullptr;
    CLI::App* list = nullptr;
    CLI::App* reference = nullptr;
    CLI::App* op_start = nullptr;
    CLI::App* op_show = nullptr;
    CLI::App* op_cancel = nullptr;
    CLI::App* op_list = nullptr;
    std::string operation_state;
    int operation_limit = 20;
    CLI::App* events_show = nullptr;

    std::optional<bool> require_flag() const {
        return require_registered_types.empty() ? std::nullopt : std::optional<bool>(require_registered_types == "true");
    }
};

void add_require_flag(CLI::App* command, CommandLine& c) {
    command
        ->add_option("--require-registered-types", c.require_registered_types,
                     "true or false: set the database-wide check outbox_publish() makes (left as it is when "
                     "omitted; only this flag can switch it off, and each change is audited)")
        ->check(CLI::IsMember({"true", "false"}));
}

/// run, migrate, status, plugins check, new-plugin.
void add_host_commands(CLI::App& app, CommandLine& c) {
    c.run = app.add_subcommand("run", "process events until SIGTERM/SIGINT");
    c.run->add_flag("--migrate", c.migrate_first, "apply pending migrations before starting");
    c.migrate = app.add_subcommand("migrate", "apply pending schema migrations");
    c.migrate->add_option("--runtime-role", c.roles.runtime,
                          "existing role `outboxd run` connects as; granted exactly what the runtime needs");
    c.migrate->add_option("--publisher-role", c.roles.publisher,
                          "existing role publishers connect as; granted EXECUTE on outbox_publish and outbox_publish_many only");
    c.migrate->add_flag("--offline", c.offline,
                        "apply migrations that are not online even while hosts of an older release are live "
                        "(refused otherwise, exit code 4)");
    add_require_flag(c.migrate, c);
    c.status = app.add_subcommand("status", "show backlog, unhandled event types and events needing review");
    auto* plugins = app.add_subcommand("plugins", "inspect plugin files");
    plugins->require_subcommand(1);
    c.check = plugins->add_subcommand("check", "load every plugin in DIR and report OK or the reason it is refused");
    c.check->add_option("DIR", c.check_dir, "plugin directory")->required();
    c.new_plugin = app.add_subcommand("new-plugin", "write a plugin folder (CMake, handler, README, GoogleTest) to start from");
    c.new_plugin->add_option("NAME", c.new_plugin_name, "the handler name, e.g. acme-mailer")->required();
    c.new_plugin->add_option("--dir", c.new_plugin_dir, "the folder to create (must not exist or be empty)")->required();
}

/// operations start|show|cancel|list.
void add_operations_commands(CLI::App& app, CommandLine& c) {
    auto* operations = app.add_subcommand(
        "operations", "operator jobs: re-drive, discard or cancel every event a filter matches, in batches");
    operations->require_subcommand(1);
    OperationArgs& o = c.operation_args;
    c.op_start = operations->add_subcommand("start", "start a job (or preview it with --dry-run)");
    c.op_start->add_option("--action", o.action, "redrive, discard, cancel or replay")
        ->required()
        ->check(CLI::IsMember({"redrive", "discard", "cancel", "replay"}));
    c.op_start->add_option("--event-type", o.event_type, "events of this type");
    c.op_start->add_option("--code", o.code, "... whose last_error_code is this");
    c.op_start->add_flag("--no-code", o.no_code, "... that have no last_error_code");
    c.op_start->add_option("--status", o.status,
                           "... in this status (REVIEW_REQUIRED, PENDING or RETRY_WAIT; COMPLETED or DISCARDED to replay)");
    c.op_start->add_option("--after", o.after, "... that occurred at or after this RFC 3339 time");
    c.op_start->add_option("--before", o.before, "... that occurred before this RFC 3339 time");
    c.op_start->add_option("--aggregate-key", o.aggregate_key, "... of this aggregate");
    c.op_start->add_option("--handler", o.handler,
                           "... of a type this handler takes, not consumed by it yet; with --action replay: the one "
                           "handler to run again");
    c.op_start->add_option("--company", o.company, "... of this company only (default: every company)");
    c.op_start->add_option("--reason", o.reason, "why (10 to 300 characters, recorded per event)")->required();
    c.op_start->add_option("--idempotency-key", o.idempotency_key,
                           "a key unique to this decision; the same command with it starts nothing twice");
    c.op_start->add_flag("--dry-run", o.dry_run, "print how many events match and some of their ids; change nothing");
    c.op_start->add_flag("--detach", o.detach, "start the job and return; the hosts work it");
    c.op_show = operations->add_subcommand("show", "a job's state and progress");
    c.op_show->add_option("ID", c.operation_id, "the operation id")->required();
    c.op_show->add_option("--format", c.list_format, "text or json")->check(CLI::IsMember({"text", "json"}));
    c.op_cancel = operations->add_subcommand("cancel", "stop a running job after its batch in flight");
    c.op_cancel->add_option("ID", c.operation_id, "the operation id")->required();
    c.op_list = operations->add_subcommand("list", "the newest jobs first, every company's");
    c.op_list->add_option("--state", c.operation_state, "only jobs in this state")
        ->check(CLI::IsMember(std::vector<std::string>(outbox::operations::kOperationStates.begin(),
                                                       outbox::operations::kOperationStates.end())));
    c.op_list->add_option("--limit", c.operation_limit, "at most this many (1 to 100, default 20)")
        ->check(CLI::Range(1, outbox::operations::kMaxOperationList));
    c.op_list->add_option("--format", c.list_format, "text or json")->check(CLI::IsMember({"text", "json"}));
}

/// retry, handlers pause|resume, event-types apply|list, config reference.
void add_operator_commands(CLI::App& app, CommandLine& c) {
    c.retry = app.add_subcommand(
        "retry", "re-drive one REVIEW_REQUIRED event, or a group of them (as the admin API's retries do)");
    RetryArgs& r = c.retry_args;
    c.retry->add_option("EVENT_ID", r.event_id, "the event's id (omit to re-drive a group by --event-type/--code)");
    c.retry->add_option("--expected-version", r.expected_version, "one event: its version as you last read it");
    c.retry->add_option("--reason", r.reason, "why it is safe to retry now (10 to 300 characters)")->required();
    c.retry->add_option("--idempotency-key", r.idempotency_key,
                        "a key unique to this decision; repeating the command with it does nothing twice "
                        "(required for one event; for a group a new one is made and printed when omitted)");
    c.retry->add_option("--event-type", r.event_type, "group: REVIEW_REQUIRED events of this type");
    c.retry->add_option("--code", r.code, "group: ... whose last_error_code is this");
    c.retry->add_option("--before", r.before, "group: ... that occurred before this RFC 3339 time");
    c.retry->add_option("--limit", r.limit, "group: at most this many, oldest first (1 to 1000, default 100)");

    add_operations_commands(app, c);

    auto* events = app.add_subcommand("events", "look at one event");
    events->require_subcommand(1);
    c.events_show = events->add_subcommand("show", "an event's status and every attempt on record");
    c.events_show->add_option("ID", c.event_id, "the event's id")->required();
    c.events_show->add_option("--format", c.list_format, "text or json")->check(CLI::IsMember({"text", "json"}));

    auto* handlers = app.add_subcommand("handlers", "pause or resume a handler on every host");
    handlers->require_subcommand(1);
    c.pause = handlers->add_subcommand("pause", "stop calling handler NAME on every host; its events wait");
    c.pause->add_option("NAME", c.handler_name, "the handler's name")->required();
    c.resume = handlers->add_subcommand("resume", "call handler NAME again on every host");
    c.resume->add_option("NAME", c.handler_name, "the handler's name")->required();

    auto* event_types = app.add_subcommand("event-types", "the event-type registry outbox_publish() checks");
    event_types->require_subcommand(1);
    c.apply = event_types->add_subcommand("apply", "apply a registry file (idempotent; prints what changed)");
    c.apply->add_option("FILE", c.registry_file, "YAML: event_types: {Type: {fields: {name: {type: ...}}}}")->required();
    add_require_flag(c.apply, c);
    c.list = event_types->add_subcommand("list", "show the registered event types");
    c.list->add_option("--format", c.list_format, "text or json")->check(CLI::IsMember({"text", "json"}));

    auto* config_command = app.add_subcommand("config", "configuration tools");
    config_command->require_subcommand(1);
    c.reference = config_command->add_subcommand(
        "reference", "print the configuration reference (every key, its variable, type, default) in Markdown");
}

/// Runs the command that was parsed, with the configuration loaded.
int run_parsed(const CommandLine& c, const config::Config& config, const AdminFactory& admin) {
    if (*c.run) return run_command(config, c.migrate_first, admin);
    if (*c.migrate) return migrate_command(config, c.roles, c.offline, c.require_flag());
    if (*c.status) return status_command(config);
    if (*c.retry) return retry_command(config, c.retry_args);
    if (*c.op_start) return operations_start_command(config, c.operation_args);
    if (*c.op_show) return operations_show_command(config, c.operation_id, c.list_format);
    if (*c.op_cancel) return operations_cancel_command(config, c.operation_id);
    if (*c.op_list) {
        return operations_list_command(config, c.operation_state.empty() ? std::nullopt : std::optional(c.operation_state),
                                       c.operation_limit, c.list_format);
    }
    if (*c.events_show) return events_show_command(config, c.event_id, c.list_format);
    if (*c.pause) return handlers_command(config, true, c.handler_name);
    if (*c.resume) return handlers_command(config, false, c.handler_name);
    if (*c.apply) return event_types_apply_command(config, c.registry_file, c.require_flag());
    if (*c.list) return event_types_list_command(config, c.list_format);
    if (*c.check) {
        plugin::HandlerConfigs configs;
        for (const auto& [name, settings] : config.handlers) configs[name] = settings.config_json;
        return plugins_check(c.check_dir, configs, std::cout, !c.config_path.empty());
    }
    return 2;
}

}  // namespace

int run_cli(int argc, char** argv, const AdminFactory& admin) {
    CLI::App app{"outboxd: transactional-outbox worker runtime for PostgreSQL"};
    app.require_subcommand(1);
    app.set_version_flag("--version", std::string("outboxd ") + OUTBOXD_VERSION + " (needs database schema version " +
                                          std::to_string(db::Migrator().latest_version()) + ")");
    CommandLine c;
    app.add_option("-c,--config", c.config_path, "YAML configuration file (default: defaults and OUTBOX_* environment)")
        ->check(CLI::ExistingFile);
    add_host_commands(app, c);
    add_operator_commands(app, c);
    // The config option is accepted after the subcommand as well.
    for (auto* sub : {c.run, c.migrate, c.status, c.check, c.retry, c.pause, c.resume, c.apply, c.list, c.op_start,
                      c.op_show, c.op_cancel, c.op_list, c.events_show}) {
        sub->add_option("-c,--config", c.config_path, "YAML configuration file")->check(CLI::ExistingFile);
    }

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? 0 : 2;
    }
    // Documentation of the settings table: no configuration is read, so it is the same
    // whatever the environment holds.
    if (*c.reference) {
        std::cout << config::config_reference_markdown();
        return 0;
    }

    // Needs neither configuration nor database.
    if (*c.new_plugin) return new_plugin_command(c.new_plugin_name, c.new_plugin_dir, std::cout, std::cerr);

    config::Config config;
    try {
        config = config::load_config(c.config_path.empty() ? std::nullopt : std::optional<std::string>(c.config_path),
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
    return run_parsed(c, config, admin);
}

}  // namespace outbox::app
