#include "registry/event_types.hpp"

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <pqxx/pqxx>
#include <yaml-cpp/yaml.h>

#include "core/identifiers.hpp"

namespace outbox::registry {
namespace {

constexpr long long kMaxStringLength = 8192;  // outbox_publish() refuses larger payloads anyway
constexpr long long kDefaultMaxLength = 256;  // SafePayload's default

// Shown in one-line messages: control characters (a newline in a key) become '?'.
std::string one_line(std::string text) {
    for (char& c : text) {
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    }
    if (text.size() > 200) text = text.substr(0, 200) + "...";
    return text;
}

[[noreturn]] void fail(const std::string& source, const std::string& path, const std::string& message) {
    throw RegistryFileError(source + ": " + (path.empty() ? "" : path + ": ") + message);
}

std::string scalar_text(const YAML::Node& node) { return node.IsScalar() ? node.Scalar() : std::string(); }

nlohmann::json parse_field(const std::string& source, const std::string& path, const YAML::Node& node) {
    if (!node.IsMap()) fail(source, path, "must be a map with type (string, integer, number, boolean), max_length, identifier");
    std::string type;
    std::optional<long long> max_length;
    bool identifier = false;
    for (const auto& entry : node) {
        const std::string key = scalar_text(entry.first);
        const YAML::Node& value = entry.second;
        if (key == "type") {
            type = scalar_text(value);
            if (type != "string" && type != "integer" && type != "number" && type != "boolean") {
                fail(source, path + ".type", "'" + one_line(type) + "' is not one of string, integer, number, boolean");
            }
        } else if (key == "max_length") {
            long long n = 0;
            if (!value.IsScalar() || !YAML::convert<long long>::decode(value, n) || n < 1 || n > kMaxStringLength) {
                fail(source, path + ".max_length",
                     "'" + one_line(scalar_text(value)) + "' is not a whole number from 1 to " + std::to_string(kMaxStringLength));
            }
            max_length = n;
        } else if (key == "identifier") {
            if (!value.IsScalar() || !YAML::convert<bool>::decode(value, identifier)) {
                fail(source, path + ".identifier", "'" + one_line(scalar_text(value)) + "' is not true or false");
            }
        } else {
            fail(source, path + "." + one_line(key), "unknown key; allowed: type, max_length, identifier");
        }
    }
    if (type.empty()) fail(source, path + ".type", "is required (string, integer, number or boolean)");
    if (max_length && type != "string") fail(source, path + ".max_length", "only string fields have a max_length");
    nlohmann::json field{{"type", type}, {"identifier", identifier}};
    if (type == "string") field["max_length"] = max_length.value_or(kDefaultMaxLength);
    return field;
}

// "+a, -b, ~c" between two normalized field sets.
std::string describe_change(const nlohmann::json& before, const nlohmann::json& after) {
    std::string out;
    const auto add = [&](char sign, const std::string& name) { out += (out.empty() ? "" : ", ") + std::string(1, sign) + name; };
    for (const auto& [name, spec] : after.items()) {
        if (!before.contains(name)) {
            add('+', name);
        } else if (before.at(name) != spec) {
            add('~', name);
        }
    }
    for (const auto& [name, spec] : before.items()) {
        if (!after.contains(name)) add('-', name);
    }
    return out;
}

constexpr const char* kUpsertSql = R"SQL(
INSERT INTO outbox_event_type AS t (event_type, fields, updated_by) VALUES ($1, $2::jsonb, $3)
ON CONFLICT (event_type) DO UPDATE
SET fields = EXCLUDED.fields, version = t.version + 1, updated_at = now(), updated_by = EXCLUDED.updated_by
WHERE t.fields IS DISTINCT FROM EXCLUDED.fields
RETURNING version
)SQL";

constexpr const char* kReadSettingSql =
    "SELECT coalesce((SELECT value = 'true'::jsonb FROM outbox_setting WHERE name = 'require_registered_types'), false)";

constexpr const char* kSettingSql = R"SQL(
INSERT INTO outbox_setting (name, value) VALUES ('require_registered_types', to_jsonb($1::boolean))
ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, updated_at = now()
)SQL";

}  // namespace

SettingChange set_require_registered_types(pqxx::work& tx, std::optional<bool> value, const std::string& actor) {
    // Serialises concurrent changes so each audit row's old value is the one it replaced.
    tx.exec("LOCK TABLE outbox_setting IN SHARE ROW EXCLUSIVE MODE");
    SettingChange change;
    change.before = tx.exec(kReadSettingSql)[0][0].as<bool>();
    change.after = value.value_or(change.before);
    if (change.after == change.before) return change;
    tx.exec_params0(kSettingSql, change.after);
    const nlohmann::json detail{{"setting", "require_registered_types"}, {"old", change.before}, {"new", change.after}};
    tx.exec_params0(
        "INSERT INTO audit_event (actor, action, target_id, detail) "
        "VALUES ($1, 'outbox.setting_changed', 'require_registered_types', $2::jsonb)",
        actor, detail.dump());
    return change;
}

SettingChange set_require_registered_types(pqxx::connection& conn, std::optional<bool> value, const std::string& actor) {
    pqxx::work tx(conn);
    const SettingChange change = set_require_registered_types(tx, value, actor);
    tx.commit();
    return change;
}

RegistryFileError::RegistryFileError(const std::string& message) : std::runtime_error(one_line(message)) {}

std::vector<EventTypeDefinition> parse_registry(const std::string& yaml_text, const std::string& source) {
    YAML::Node root;
    try {
        root = YAML::Load(yaml_text);
    } catch (const YAML::Exception& e) {
        fail(source, "", "not valid YAML: " + std::string(e.what()));
    }
    if (!root.IsMap() || root.size() != 1 || !root["event_types"]) {
        fail(source, "", "must be a map with one key, event_types");
    }
    const YAML::Node types = root["event_types"];
    if (types.IsNull()) return {};
    if (!types.IsMap()) fail(source, "event_types", "must be a map of event type names");
    static const std::regex field_pattern("^[A-Za-z_][A-Za-z0-9_]{0,99}$");
    std::vector<EventTypeDefinition> definitions;
    std::set<std::string> seen;
    for (const auto& entry : types) {
        const std::string name = scalar_text(entry.first);
        const std::string path = "event_types." + one_line(name);
        if (!core::is_event_type(name)) {
            fail(source, path, "an event type is PascalCase letters and digits, e.g. MissionCompleted");
        }
        if (!seen.insert(name).second) fail(source, path, "is defined twice");
        const YAML::Node& body = entry.second;
        if (!body.IsMap() || body.size() != 1 || !body["fields"]) fail(source, path, "must be a map with one key, fields");
        const YAML::Node fields = body["fields"];
        if (!fields.IsMap()) fail(source, path + ".fields", "must be a map of field names");
        EventTypeDefinition definition{name, nlohmann::json::object()};
        for (const auto& field : fields) {
            const std::string field_name = scalar_text(field.first);
            const std::string field_path = path + ".fields." + one_line(field_name);
            if (!std::regex_match(field_name, field_pattern)) {
                fail(source, field_path, "a field name is letters, digits and _ (1 to 100, not starting with a digit)");
            }
            if (definition.fields.contains(field_name)) fail(source, field_path, "is defined twice");
            definition.fields[field_name] = parse_field(source, field_path, field.second);
        }
        definitions.push_back(std::move(definition));
    }
    return definitions;
}

std::vector<EventTypeDefinition> read_registry_file(const std::string& path) {
    std::ifstream in(path);
    if (!in) fail(path, "", "cannot be read");
    std::ostringstream text;
    text << in.rdbuf();
    return parse_registry(text.str(), path);
}

ApplyResult apply_registry(pqxx::connection& conn, const std::vector<EventTypeDefinition>& definitions,
                           std::optional<bool> require_registered_types, const std::string& actor) {
    pqxx::work tx(conn);
    tx.exec("SET LOCAL lock_timeout = '10s'");
    // Concurrent applies run one after the other; publishers (plain reads) are not blocked.
    tx.exec("LOCK TABLE outbox_event_type IN SHARE ROW EXCLUSIVE MODE");
    std::map<std::string, nlohmann::json> before;
    for (const auto& row : tx.exec("SELECT event_type, fields::text FROM outbox_event_type")) {
        before[row[0].as<std::string>()] = nlohmann::json::parse(row[1].as<std::string>());
    }
    ApplyResult result;
    std::set<std::string> named;
    for (const auto& definition : definitions) {
        named.insert(definition.event_type);
        AppliedType applied;
        applied.event_type = definition.event_type;
        const pqxx::result r = tx.exec_params(kUpsertSql, definition.event_type, definition.fields.dump(), actor);
        const auto old = before.find(definition.event_type);
        if (r.empty()) {
            applied.change = AppliedType::Change::Unchanged;
            applied.version = tx.exec_params1("SELECT version FROM outbox_event_type WHERE event_type = $1",
                                              definition.event_type)[0]
                                  .as<int>();
        } else {
            applied.version = r[0][0].as<int>();
            applied.change = old == before.end() ? AppliedType::Change::Added : AppliedType::Change::Changed;
            if (old != before.end()) applied.detail = describe_change(old->second, definition.fields);
            const nlohmann::json detail{{"version", applied.version}, {"fields", definition.fields}};
            tx.exec_params0(
                "INSERT INTO audit_event (actor, action, target_id, detail) VALUES ($1, 'outbox.event_type_applied', $2, $3::jsonb)",
                actor, definition.event_type, detail.dump());
        }
        result.types.push_back(std::move(applied));
    }
    for (const auto& [name, fields] : before) {
        if (!named.contains(name)) result.not_in_file.push_back(name);
    }
    result.require_registered_types = set_require_registered_types(tx, require_registered_types, actor);
    tx.commit();
    return result;
}

Registry read_registry(pqxx::connection& conn) {
    pqxx::read_transaction tx(conn);
    Registry registry;
    for (const auto& row : tx.exec("SELECT event_type, fields::text, version, "
                                   "to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), updated_by "
                                   "FROM outbox_event_type ORDER BY event_type")) {
        registry.types.push_back(RegisteredType{row[0].as<std::string>(), nlohmann::json::parse(row[1].as<std::string>()),
                                                row[2].as<int>(), row[3].as<std::string>(), row[4].as<std::string>()});
    }
    const pqxx::result setting =
        tx.exec("SELECT value = 'true'::jsonb FROM outbox_setting WHERE name = 'require_registered_types'");
    registry.require_registered_types = !setting.empty() && setting[0][0].as<bool>();
    return registry;
}

nlohmann::json registry_json(const Registry& registry) {
    nlohmann::json types = nlohmann::json::object();
    for (const auto& type : registry.types) {
        types[type.event_type] = {{"version", type.version}, {"fields", type.fields}};
    }
    return {{"require_registered_types", registry.require_registered_types}, {"event_types", types}};
}

}  // namespace outbox::registry
