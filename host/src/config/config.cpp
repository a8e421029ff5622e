// Reading a configuration: the YAML file, then the OUTBOX_* environment over it, then the
// checks that span keys. What each key accepts is in settings_table.cpp.
#include "config/config.hpp"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

#include "config/settings_table.hpp"
#include "config/value_parsers.hpp"
#include "core/duration.hpp"

namespace outbox::config {
namespace {

using core::format_duration;

std::string one_line(std::string text) {
    for (char& c : text) {
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    }
    return text;
}

bool ends_with(std::string_view text, std::string_view suffix) {
    return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// --- YAML walking -------------------------------------------------------------------------

class FileReader {
public:
    explicit FileReader(std::string source) : source_(std::move(source)) {}

    std::string origin(const YAML::Node& node) const {
        const YAML::Mark mark = node.Mark();
        return mark.is_null() ? source_ : source_ + ":" + std::to_string(mark.line + 1);
    }

    // A key's value; an empty value (`key:`) has no useful mark of its own, so use the key's.
    std::string origin(const YAML::Node& key, const YAML::Node& value) const {
        return value.IsNull() ? origin(key) : origin(value);
    }

    static std::string kind(const YAML::Node& node) {
        switch (node.Type()) {
            case YAML::NodeType::Map: return "a mapping";
            case YAML::NodeType::Sequence: return "a list";
            case YAML::NodeType::Null: return "nothing";
            default: return "a scalar";
        }
    }

    // Iterates a mapping, rejecting duplicate and non-scalar keys, which yaml-cpp accepts silently.
    template <class Visit>
    void each_entry(const std::string& path, const YAML::Node& map, Visit&& visit) const {
        std::set<std::string> seen;
        for (const auto& entry : map) {
            const YAML::Node key = entry.first;  // copies: the iterator hands out proxies
            if (!key.IsScalar()) fail_at(path.empty() ? "(top level)" : path, origin(key), "keys must be plain names");
            const std::string name = key.Scalar();
            const std::string full = path.empty() ? name : path + "." + name;
            if (!seen.insert(name).second) fail_at(full, origin(key), "duplicate key");
            visit(full, name, key, YAML::Node(entry.second));
        }
    }

    void require_map(const std::string& path, const YAML::Node& key, const YAML::Node& value) const {
        if (!value.IsMap()) {
            fail_at(path, origin(key, value), "expected a mapping of " + path + " settings, got " + kind(value));
        }
    }

    Raw scalar(const std::string& path, const YAML::Node& key, const YAML::Node& value) const {
        // The one list-valued key: its items are joined with commas, as its variable is written.
        if (path == "admin.platform_roles" && value.IsSequence()) {
            std::string joined;
            for (const auto& item : value) {
                if (!item.IsScalar()) fail_at(path, origin(key, value), "expected a list of role names");
                joined += (joined.empty() ? "" : ",") + item.Scalar();
            }
            return Raw{joined, origin(value)};
        }
        if (!value.IsScalar()) fail_at(path, origin(key, value), "expected a single value, got " + kind(value));
        return Raw{value.Scalar(), origin(value)};
    }

private:
    std::string source_;
};

std::string closest(std::string_view word, const std::vector<std::string_view>& candidates) {
    // Levenshtein distance: a typo one or two edits away gets a suggestion.
    auto distance = [](std::string_view a, std::string_view b) {
        std::vector<std::size_t> row(b.size() + 1);
        for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
        for (std::size_t i = 1; i <= a.size(); ++i) {
            std::size_t diagonal = row[0];
            row[0] = i;
            for (std::size_t j = 1; j <= b.size(); ++j) {
                const std::size_t above = row[j];
                row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
                diagonal = above;
            }
        }
        return row[b.size()];
    };
    std::string best;
    // Close enough to be a typo, but not so loose that short words match anything.
    std::size_t best_distance = std::min<std::size_t>(3, (word.size() + 1) / 2);
    for (const auto candidate : candidates) {
        const std::size_t d = distance(word, candidate);
        if (d < best_distance) {
            best_distance = d;
            best = candidate;
        }
    }
    return best;
}

[[noreturn]] void fail_unknown(const std::string& full, std::string_view name, const std::string& origin,
                               const std::vector<std::string_view>& allowed) {
    std::string message = "unknown key";
    if (const std::string guess = closest(name, allowed); !guess.empty()) message += " (did you mean " + guess + "?)";
    message += "; allowed here:";
    for (std::size_t i = 0; i < allowed.size(); ++i) message += (i == 0 ? " " : ", ") + std::string(allowed[i]);
    fail_at(full, origin, message);
}

bool is_secret_name(std::string_view name) {
    const std::string key = lower(name);
    if (ends_with(key, "_env")) return false;
    return ends_with(key, "secret") || ends_with(key, "password") || ends_with(key, "token") ||
           ends_with(key, "api_key");
}

nlohmann::ordered_json plain_scalar(const std::string& text) {
    if (text == "true" || text == "True" || text == "TRUE") return true;
    if (text == "false" || text == "False" || text == "FALSE") return false;
    if (const auto integer = core::parse_number<std::int64_t>(text)) return *integer;
    if (const auto number = core::parse_number<double>(text); number && std::isfinite(*number)) return *number;
    return text;
}

// handlers.<name>.config is the plugin's own business, except that secrets never live in it.
nlohmann::ordered_json to_json(const FileReader& file, const std::string& path, const YAML::Node& node) {
    switch (node.Type()) {
        case YAML::NodeType::Map: {
            auto object = nlohmann::ordered_json::object();
            file.each_entry(
                path, node,
                [&](const std::string& full, const std::string& name, const YAML::Node& key, const YAML::Node& value) {
                    if (is_secret_name(name)) {
                        fail_at(full, file.origin(key),
                                "secrets must not be written in the configuration file; put the secret in an "
                                "environment variable and give that variable's name as " +
                                    name + "_env");
                    }
                    object[name] = to_json(file, full, value);
                });
            return object;
        }
        case YAML::NodeType::Sequence: {
            auto array = nlohmann::ordered_json::array();
            for (std::size_t i = 0; i < node.size(); ++i) {
                array.push_back(to_json(file, path + "[" + std::to_string(i) + "]", node[i]));
            }
            return array;
        }
        case YAML::NodeType::Scalar:
            // yaml-cpp tags plain scalars "?"; quoted or explicitly tagged ones stay strings.
            return node.Tag() == "?" ? plain_scalar(node.Scalar()) : nlohmann::ordered_json(node.Scalar());
        default: return nullptr;
    }
}

// The handler keys under `prefix` ("" or "circuit_breaker."), without it.
std::vector<std::string_view> handler_keys_under(std::string_view prefix) {
    std::vector<std::string_view> names;
    for (const auto& handler_key : handler_keys()) {
        std::string_view name = handler_key.name;
        if (name.substr(0, prefix.size()) != prefix) continue;
        name.remove_prefix(prefix.size());
        if (name.find('.') == std::string_view::npos) names.push_back(name);
    }
    return names;
}

const HandlerKey* find_handler_key(std::string_view name) {
    const auto keys = handler_keys();
    const auto it = std::find_if(keys.begin(), keys.end(), [&](const HandlerKey& k) { return k.name == name; });
    return it == keys.end() ? nullptr : &*it;
}

// handlers.<name>.circuit_breaker: a mapping (possibly empty) of its own scalar keys.
void read_circuit_breaker(const FileReader& file, const std::string& path, const YAML::Node& key,
                          const YAML::Node& value, HandlerSettings& settings) {
    if (!value.IsMap()) {
        fail_at(path, file.origin(key, value),
                "expected a mapping of failure_ratio, min_calls, window and cool_down (write {} for the defaults), "
                "got " + FileReader::kind(value));
    }
    settings.circuit_breaker.emplace();
    const std::string prefix = "circuit_breaker.";
    const auto allowed = handler_keys_under(prefix);
    file.each_entry(path, value,
                    [&](const std::string& full, const std::string& name, const YAML::Node& sub_key,
                        const YAML::Node& sub_value) {
                        const HandlerKey* handler_key = find_handler_key(prefix + name);
                        if (handler_key == nullptr) fail_unknown(full, name, file.origin(sub_key), allowed);
                        handler_key->apply(settings, Value{full, file.scalar(full, sub_key, sub_value)});
                    });
}

// A dotted handler key ("commit_group.max_events") is written as a mapping in the file:
// `commit_group: {max_events: 32}`. Its keys are applied like the flat ones.
void read_handler_mapping(const FileReader& file, const std::string& path, std::string_view group,
                          const YAML::Node& key, const YAML::Node& value, HandlerSettings& settings) {
    if (!value.IsMap()) fail_at(path, file.origin(key, value), "expected a mapping, got " + FileReader::kind(value));
    const std::string prefix = std::string(group) + ".";
    std::vector<std::string_view> allowed;
    for (const auto& handler_key : handler_keys()) {
        if (handler_key.name.starts_with(prefix)) allowed.push_back(handler_key.name.substr(prefix.size()));
    }
    file.each_entry(path, value, [&](const std::string& full, const std::string& name, const YAML::Node& sub_key,
                                     const YAML::Node& sub_value) {
        const auto keys = handler_keys();
        const auto found = std::find_if(keys.begin(), keys.end(),
                                        [&](const HandlerKey& k) { return k.name == prefix + name; });
        if (found == keys.end()) fail_unknown(full, name, file.origin(sub_key), allowed);
        found->apply(settings, Value{full, file.scalar(full, sub_key, sub_value)});
    });
    // Present without max_events would leave grouping off while the file seems to ask for it.
    if (group == "commit_group" && settings.commit_group.max_events == 0) {
        fail_at(path, file.origin(key, value), "set max_events (2 to 64) to turn commit grouping on");
    }
}

HandlerSettings read_handler(const FileReader& file, const std::string& path, const YAML::Node& section) {
    HandlerSettings settings;
    // The file's names: the flat keys, and the first part of each dotted one (a mapping).
    std::vector<std::string_view> allowed;
    for (const auto& handler_key : handler_keys()) {
        const std::string_view first = handler_key.name.substr(0, handler_key.name.find('.'));
        if (std::find(allowed.begin(), allowed.end(), first) == allowed.end()) allowed.push_back(first);
    }
    file.each_entry(
        path, section,
        [&](const std::string& full, const std::string& name, const YAML::Node& key, const YAML::Node& value) {
            const HandlerKey* handler_key =
                name.find('.') == std::string::npos ? find_handler_key(name) : nullptr;
            if (handler_key == nullptr) {
                if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
                    fail_unknown(full, name, file.origin(key), allowed);
                }
                read_handler_mapping(file, full, name, key, value, settings);
                return;
            }
            if (handler_key->apply != nullptr) {
                handler_key->apply(settings, Value{full, file.scalar(full, key, value)});
                return;
            }
            if (name == "circuit_breaker") {
                read_circuit_breaker(file, full, key, value, settings);
                return;
            }
            if (value.IsNull()) return;
            if (!value.IsMap()) {
                fail_at(full, file.origin(key, value), "expected a mapping, got " + FileReader::kind(value));
            }
            settings.config_json =
                to_json(file, full, value).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        });
    return settings;
}

// tenants.companies: a mapping of company ids, each a mapping of kTenantKeys (or empty).
void read_companies(const FileReader& file, const std::string& path, const YAML::Node& key, const YAML::Node& value,
                    Config& config) {
    if (value.IsNull()) return;
    file.require_map(path, key, value);
    std::vector<std::string_view> allowed;
    for (const auto& tenant_key : tenant_keys()) allowed.push_back(tenant_key.name);
    file.each_entry(path, value, [&](const std::string& full, const std::string& company, const YAML::Node& company_key,
                                     const YAML::Node& section) {
        // The limits of event_publication.company_id: a longer name could never match an event.
        const bool printable = std::all_of(company.begin(), company.end(), [](char c) {
            return static_cast<unsigned char>(c) >= 0x20 && c != 0x7f;
        });
        if (company.empty() || company.size() > 100 || !printable) {
            fail_at(full, file.origin(company_key), "a company id is 1 to 100 printable characters");
        }
        TenantSettings& settings = config.tenants.companies[company];
        if (section.IsNull()) return;
        file.require_map(full, company_key, section);
        file.each_entry(full, section, [&](const std::string& setting_path, const std::string& name,
                                           const YAML::Node& setting_key, const YAML::Node& setting_value) {
            const auto keys = tenant_keys();
            const auto found =
                std::find_if(keys.begin(), keys.end(), [&](const TenantKey& k) { return k.name == name; });
            if (found == keys.end()) fail_unknown(setting_path, name, file.origin(setting_key), allowed);
            found->apply(settings, Value{setting_path, file.scalar(setting_path, setting_key, setting_value)});
        });
    });
}

class IgnoreEvents final : public YAML::EventHandler {
public:
    void OnDocumentStart(const YAML::Mark&) override {}
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
    void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
    void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
    void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
    void OnMapEnd() override {}
};

YAML::Node load_document(const std::string& yaml_text, const std::string& source) {
    try {
        // Count at most two documents before building one: yaml-cpp 0.7's LoadAll never
        // ends on some malformed text (a lone "," is an endless run of empty documents).
        std::istringstream in(yaml_text);
        YAML::Parser parser(in);
        IgnoreEvents ignore;
        int documents = 0;
        while (documents < 2 && parser.HandleNextDocument(ignore)) ++documents;
        if (documents > 1) throw ConfigError(source + ": expected one YAML document, found more than one");
        return documents == 0 ? YAML::Node() : YAML::Load(yaml_text);
    } catch (const YAML::Exception& e) {
        std::string where = source;
        if (!e.mark.is_null()) where += ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1);
        throw ConfigError(where + ": YAML syntax error: " + e.msg);
    }
}

// Reads the file into `raw` (scalar settings by key) and `config.handlers`.
void read_file(const FileReader& file, const YAML::Node& root, std::map<std::string, Raw, std::less<>>& raw,
               Config& config) {
    if (root.IsNull()) return;
    if (!root.IsMap()) {
        fail_at("(top level)", file.origin(root), "expected a mapping of sections, got " + FileReader::kind(root));
    }
    const std::vector<std::string_view> sections(kSections.begin(), kSections.end());
    file.each_entry(
        "", root,
        [&](const std::string& section, const std::string&, const YAML::Node& section_key, const YAML::Node& body) {
            if (std::find(kSections.begin(), kSections.end(), section) == kSections.end()) {
                fail_unknown(section, section, file.origin(section_key), sections);
            }
            if (body.IsNull()) return;  // every key commented out
            file.require_map(section, section_key, body);
            if (section == "handlers") {
                file.each_entry(section, body,
                                [&](const std::string& full, const std::string& name, const YAML::Node& key,
                                    const YAML::Node& value) {
                                    if (value.IsNull()) {
                                        config.handlers[name] = HandlerSettings{};
                                        return;
                                    }
                                    file.require_map(full, key, value);
                                    config.handlers[name] = read_handler(file, full, value);
                                });
                return;
            }
            std::vector<std::string_view> allowed;
            for (const auto& setting : settings_table()) {
                if (setting.key.substr(0, setting.key.find('.')) == section)
                    allowed.push_back(setting.key.substr(section.size() + 1));
            }
            if (section == "tenants") allowed.push_back("companies");
            file.each_entry(
                section, body,
                [&](const std::string& full, const std::string& name, const YAML::Node& key, const YAML::Node& value) {
                    if (full == "tenants.companies") {
                        read_companies(file, full, key, value, config);
                        return;
                    }
                    if (full == "admin.jwt_secret") {
                        fail_at(full, file.origin(key),
                                "secrets are never read from the configuration file; set " + std::string(kSecretEnv) +
                                    " in the environment instead");
                    }
                    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
                        fail_unknown(full, name, file.origin(key), allowed);
                    }
                    raw[full] = file.scalar(full, key, value);
                });
        });
}

// A token policy that cannot be configured weak. Neither message quotes the secret.
void check_admin_keys(const Config& config, const std::map<std::string, Raw, std::less<>>& raw) {
    const std::size_t secret_bytes = config.admin.jwt_secret.size();
    if (secret_bytes > 0 && secret_bytes < kMinSecretBytes) {
        throw ConfigError(std::string(kSecretEnv) + " is shorter than " + std::to_string(kMinSecretBytes) +
                          " bytes; an HS256 secret that short can be guessed from any one token: use at least " +
                          std::to_string(kMinSecretBytes) + " random bytes (e.g. openssl rand -base64 48)");
    }
    // An RS256 key usually belongs to an identity provider that also signs tokens for other
    // applications; only the audience tells this API's tokens apart.
    if (!config.admin.jwt_public_key_file.empty() && config.admin.jwt_audience.empty()) {
        const auto key = raw.find("admin.jwt_public_key_file");
        throw ConfigError("admin.jwt_audience is required when admin.jwt_public_key_file is set (from " +
                          (key != raw.end() ? key->second.origin : std::string("default")) +
                          "): tokens from an identity provider shared with other applications must name this API "
                          "in aud; set admin.jwt_audience or OUTBOX_ADMIN_JWT_AUDIENCE");
    }
}

}  // namespace

ConfigError::ConfigError(const std::string& message) : std::runtime_error(one_line(message)) {}

HandlerSettings Config::handler(const std::string& handler_name) const {
    const auto it = handlers.find(handler_name);
    HandlerSettings settings = it == handlers.end() ? HandlerSettings{} : it->second;
    if (!settings.timeout) settings.timeout = outbox.handler_timeout;
    return settings;
}

EnvLookup process_environment() {
    return [](const std::string& name) -> std::optional<std::string> {
        const char* value = std::getenv(name.c_str());
        return value == nullptr ? std::nullopt : std::optional<std::string>(value);
    };
}

void remove_secret_from_environment() noexcept {
    const std::string name(kSecretEnv);
    if (char* value = std::getenv(name.c_str())) std::memset(value, 0, std::strlen(value));
    ::unsetenv(name.c_str());
}

Config parse_config(const std::string& yaml_text, const std::string& source, const EnvLookup& env) {
    Config config;
    const FileReader file(source);
    std::map<std::string, Raw, std::less<>> raw;
    read_file(file, load_document(yaml_text, source), raw, config);

    std::set<std::string_view> from_env;
    for (const auto& setting : settings_table()) {
        if (auto value = env(std::string(setting.env))) {
            raw[std::string(setting.key)] = Raw{std::move(*value), std::string(setting.env)};
            from_env.insert(setting.key);
        }
    }
    for (const auto& setting : settings_table()) {
        if (const auto it = raw.find(setting.key); it != raw.end()) {
            setting.apply(config, Value{setting.key, it->second, from_env.contains(setting.key)});
        }
    }
    if (auto secret = env(std::string(kSecretEnv))) config.admin.jwt_secret = std::move(*secret);
    check_admin_keys(config, raw);

    if (config.admin.db_connections_per_company > config.admin.db_connections) {
        const auto pool = raw.find("admin.db_connections");
        fail("admin.db_connections_per_company",
             raw.count("admin.db_connections_per_company") != 0
                 ? raw.at("admin.db_connections_per_company")
                 : Raw{std::to_string(config.admin.db_connections_per_company), "default"},
             "must be at most admin.db_connections (" + std::to_string(config.admin.db_connections) + ", from " +
                 (pool != raw.end() ? pool->second.origin : std::string("default")) + ")");
    }
    if (config.outbox.max_backoff < config.outbox.initial_backoff) {
        auto given = [&](std::string_view key, milliseconds value) {
            const auto it = raw.find(key);
            return it != raw.end() ? it->second : Raw{format_duration(value), "default"};
        };
        const Raw initial = given("outbox.initial_backoff", config.outbox.initial_backoff);
        fail("outbox.max_backoff", given("outbox.max_backoff", config.outbox.max_backoff),
             "must be at least outbox.initial_backoff (" + initial.text + ", from " + initial.origin +
                 ") and at most 7d");
    }
    return config;
}

Config load_config(const std::optional<std::string>& path, const EnvLookup& env) {
    if (!path) return parse_config({}, "(no configuration file)", env);
    std::error_code ec;
    if (std::filesystem::is_directory(*path, ec)) {
        throw ConfigError("cannot read configuration file " + *path + ": it is a directory");
    }
    std::ifstream in(*path, std::ios::binary);
    if (!in) throw ConfigError("cannot read configuration file " + *path + ": " + std::strerror(errno));
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) throw ConfigError("cannot read configuration file " + *path + ": read error");
    return parse_config(text.str(), *path, env);
}

}  // namespace outbox::config
