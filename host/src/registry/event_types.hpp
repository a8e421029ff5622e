#pragma once

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <pqxx/connection>

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

struct ApplyResult {
    std::vector<AppliedType> types;
    std::vector<std::string> not_in_file;  // registered types the file does not name (kept)
    bool require_registered_types_before = false;
    bool require_registered_types = false;
};

/// Applies `definitions` in one transaction: a new type is added at version 1, a type whose
/// fields differ gets them and version + 1 (with an audit_event row), an identical one is
/// left alone; types the file does not name are kept. Also stores
/// `require_registered_types` (outbox.require_registered_types) for outbox_publish().
ApplyResult apply_registry(pqxx::connection& conn, const std::vector<EventTypeDefinition>& definitions,
                           bool require_registered_types, const std::string& actor);

/// Stores outbox.require_registered_types where outbox_publish() reads it; returns the
/// value it replaced.
bool store_require_registered_types(pqxx::connection& conn, bool value);

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
