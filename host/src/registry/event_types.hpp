#pragma once

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <pqxx/connection>
#include <pqxx/transaction>

namespace outbox::registry {

/// A registry file that cannot be applied. what() is one line naming the file, the key path
/// and what is allowed (never more than one line, whatever the file holds).
class RegistryFileError : public std::runtime_error {
public:
    explicit RegistryFileError(const std::string& message);
};

/// One event type of a registry file. `fields` is normalized as stored in
/// outbox_event_type.fields: {"<field>": {"type": ..., "identifier": bool[, "max_length": N]}},
/// string fields always with their max_length (default 256).
struct EventTypeDefinition {
    std::string event_type;
    nlohmann::json fields = nlohmann::json::object();
};

/// Reads `event_types: {Type: {fields: {name: {type, max_length, identifier}}}}`.
/// Throws RegistryFileError for unreadable files, bad YAML and anything outside that shape.
std::vector<EventTypeDefinition> read_registry_file(const std::string& path);

/// The same from YAML text (`source` names it in errors).
std::vector<EventTypeDefinition> parse_registry(const std::string& yaml_text, const std::string& source);

struct AppliedType {
    enum class Change { Added, Changed, Unchanged };
    std::string event_type;
    Change change = Change::Unchanged;
    int version = 0;
    std::string detail;  // for Changed: "+field, -field, ~field"
};

/// The database-wide require_registered_types setting before and after a command.
struct SettingChange {
    bool before = false;
    bool after = false;
};

/// Sets require_registered_types (read by outbox_publish()) to `value`, or leaves it as it
/// is when `value` is empty; a change writes an audit_event row (actor, old, new value).
SettingChange set_require_registered_types(pqxx::work& tx, std::optional<bool> value, const std::string& actor);
SettingChange set_require_registered_types(pqxx::connection& conn, std::optional<bool> value, const std::string& actor);

struct ApplyResult {
    std::vector<AppliedType> types;
    std::vector<std::string> not_in_file;  // registered types the file does not name (kept)
    SettingChange require_registered_types;
};

/// Applies `definitions` in one transaction: a new type is added at version 1, a type whose
/// fields differ gets them and version + 1 (with an audit_event row), an identical one is
/// left alone; types the file does not name are kept. In the same transaction, sets
/// require_registered_types as set_require_registered_types() does.
ApplyResult apply_registry(pqxx::connection& conn, const std::vector<EventTypeDefinition>& definitions,
                           std::optional<bool> require_registered_types, const std::string& actor);

struct RegisteredType {
    std::string event_type;
    nlohmann::json fields;
    int version = 0;
    std::string updated_at;
    std::string updated_by;
};

struct Registry {
    std::vector<RegisteredType> types;
    bool require_registered_types = false;
};

Registry read_registry(pqxx::connection& conn);

/// `outboxd event-types list --format json`: {"require_registered_types": bool,
/// "event_types": {"<type>": {"version": N, "fields": {...}}}}.
nlohmann::json registry_json(const Registry& registry);

}  // namespace outbox::registry
