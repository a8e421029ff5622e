#include <pwd.h>
#include <unistd.h>

#include <iomanip>
#include <iostream>

#include "app/commands.hpp"
#include "core/identifiers.hpp"
#include "db/connection_pool.hpp"
#include "db/db_error.hpp"
#include "operations/handler_pause.hpp"
#include "log/log.hpp"
#include "registry/event_types.hpp"

namespace outbox::app {
namespace {

int database_failure(const char* command) {
    const db::DbFailure failure = db::classify_db_error(std::current_exception());
    std::cerr << "outboxd " << command << ": " << failure.describe()
              << (failure.kind == db::DbFailureKind::InDoubt
                      ? "; run the same command again to learn the outcome"
                      : "; check database.url / OUTBOX_DATABASE_URL and run `outboxd migrate`")
              << "\n";
    return 1;
}

}  // namespace

std::string cli_actor() {
    const uid_t uid = ::geteuid();
    if (const passwd* entry = ::getpwuid(uid); entry != nullptr && entry->pw_name != nullptr) {
        return std::string("cli:") + entry->pw_name;
    }
    return "cli:uid" + std::to_string(uid);
}

int handlers_command(const config::Config& config, bool pause, const std::string& name) {
    const char* command = pause ? "handlers pause" : "handlers resume";
    if (!core::is_handler_name(name)) {
        std::cerr << "outboxd " << command
                  << ": a handler name is 1 to 100 of a-z 0-9 . _ - starting with a letter or digit\n";
        return 2;
    }
    try {
        auto conn = db::open_connection(config.database.url);
        const bool changed = operations::set_handler_paused(*conn, name, pause, cli_actor(), "cli");
        if (pause) {
            std::cout << "handler " << name
                      << (changed ? " paused on every host: no new calls; its events wait without using attempts\n"
                                  : " was already paused; nothing changed\n");
        } else {
            std::cout << "handler " << name
                      << (changed ? " resumed on every host\n" : " was not paused; nothing changed\n");
        }
        return 0;
    } catch (const std::exception&) {
        return database_failure(command);
    }
}

std::optional<bool> requested_require_registered_types(const config::Config& config, std::optional<bool> flag) {
    if (flag) return flag;
    // The configuration may only tighten: a default or forgotten `false` never switches off
    // a check other publishers rely on.
    if (config.outbox.require_registered_types) return true;
    return std::nullopt;
}

void report_setting(const registry::SettingChange& change) {
    if (change.before == change.after) return;
    std::cout << "outbox.require_registered_types is now " << (change.after ? "true" : "false") << " (was "
              << (change.before ? "true" : "false") << "; recorded in audit_event)\n";
}

int event_types_apply_command(const config::Config& config, const std::string& file,
                              std::optional<bool> require_registered_types) {
    std::vector<registry::EventTypeDefinition> definitions;
    try {
        definitions = registry::read_registry_file(file);
    } catch (const registry::RegistryFileError& e) {
        std::cerr << "outboxd event-types apply: " << e.what() << "\n";
        return 2;
    }
    try {
        auto conn = db::open_connection(config.database.url);
        const auto result =
            registry::apply_registry(*conn, definitions,
                                     requested_require_registered_types(config, require_registered_types), cli_actor());
        for (const auto& type : result.types) {
            switch (type.change) {
                case registry::AppliedType::Change::Added:
                    std::cout << "added     " << type.event_type << " (version " << type.version << ")\n";
                    break;
                case registry::AppliedType::Change::Changed:
                    std::cout << "changed   " << type.event_type << " (version " << type.version - 1 << " -> "
                              << type.version << ": " << type.detail << ")\n";
                    break;
                case registry::AppliedType::Change::Unchanged:
                    std::cout << "unchanged " << type.event_type << " (version " << type.version << ")\n";
                    break;
            }
        }
        for (const auto& name : result.not_in_file) {
            std::cout << "kept      " << name << " (registered, not in this file)\n";
        }
        report_setting(result.require_registered_types);
        return 0;
    } catch (const std::exception&) {
        return database_failure("event-types apply");
    }
}

int event_types_list_command(const config::Config& config, const std::string& format) {
    try {
        auto conn = db::open_connection(config.database.url);
        const registry::Registry reg = registry::read_registry(*conn);
        if (format == "json") {
            std::cout << registry::registry_json(reg).dump(2) << "\n";
            return 0;
        }
        std::cout << "require_registered_types: " << (reg.require_registered_types ? "true" : "false") << "\n";
        if (reg.types.empty()) std::cout << "no event type is registered\n";
        for (const auto& type : reg.types) {
            std::cout << "\n" << log::escape_control(type.event_type) << " (version " << type.version << ", "
                      << log::escape_control(type.updated_at) << " by " << log::escape_control(type.updated_by) << ")\n";
            for (const auto& [field, spec] : type.fields.items()) {
                std::cout << "  " << std::left << std::setw(24) << log::escape_control(field)
                          << log::escape_control(spec.value("type", "?"));
                if (spec.contains("max_length")) std::cout << ", max_length " << spec["max_length"].get<long long>();
                if (spec.value("identifier", false)) std::cout << ", identifier";
                std::cout << "\n";
            }
        }
        return 0;
    } catch (const std::exception&) {
        return database_failure("event-types list");
    }
}

}  // namespace outbox::app
