#include "config/config.hpp"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
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

#include "core/duration.hpp"

namespace outbox::config {
namespace {

using namespace std::chrono_literals;
using core::format_duration;
using core::parse_duration;

// A value as written, with where it was written ("outboxd.yaml:12" or "OUTBOX_BATCH_SIZE"),
// so every error can point at the exact line or variable to fix.
struct Raw {
    std::string text;
    std::string origin;
};

std::string shown_value(std::string_view text) {
    constexpr std::size_t kMaxShown = 120;  // a pasted PEM or URL must not flood the one-line error
    std::string shown(text.substr(0, kMaxShown));
    if (text.size() > kMaxShown) shown += "...";
    // JSON escaping keeps the message on one line whatever the value contains.
    return nlohmann::json(shown).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

[[noreturn]] void fail(std::string_view key, const Raw& raw, std::string_view allowed) {
    throw ConfigError(std::string(key) + " = " + shown_value(raw.text) + " (from " + raw.origin +
                      "): " + std::string(allowed));
}

std::string one_line(std::string text) {
    for (char& c : text) {
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    }
    return text;
}

[[noreturn]] void fail_at(std::string_view key, std::string_view origin, std::string_view problem) {
    throw ConfigError(std::string(key) + " (from " + std::string(origin) + "): " + std::string(problem));
}

std::string lower(std::string_view text) {
    std::string out(text);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
}

bool ends_with(std::string_view text, std::string_view suffix) {
    return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

template <class T>
std::optional<T> parse_number(std::string_view text) {
    T value{};
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (ec != std::errc{} || ptr != end) return std::nullopt;
    return value;
}

// --- conversions ------------------------------------------------------------------------

// One value on its way into Config: the key it sets and where it came from.
struct Value {
    std::string_view key;
    const Raw& raw;
    bool from_env = false;
};

[[noreturn]] void fail(const Value& v, std::string_view allowed) { fail(v.key, v.raw, allowed); }

milliseconds to_duration(const Value& v, milliseconds lo, milliseconds hi) {
    const std::string range = "from " + format_duration(lo) + " to " + format_duration(hi);
    const auto value = parse_duration(v.raw.text);
    if (!value) fail(v, "expected a duration such as 250ms, 1s, 5m (units ms, s, m, h, d), " + range);
    if (*value < lo || *value > hi) fail(v, "expected a duration " + range);
    return *value;
}

int to_int(const Value& v, int lo, int hi) {
    const auto value = parse_number<long long>(v.raw.text);
    if (!value || *value < lo || *value > hi) {
        fail(v, "expected an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
    }
    return static_cast<int>(*value);
}

bool to_bool(const Value& v) {
    const std::string text = lower(v.raw.text);
    if (text == "true" || (v.from_env && (text == "1" || text == "yes"))) return true;
    if (text == "false" || (v.from_env && (text == "0" || text == "no"))) return false;
    fail(v, v.from_env ? "expected true or false (or 1/0, yes/no)" : "expected true or false");
}

std::string to_choice(const Value& v, std::initializer_list<std::string_view> choices) {
    std::string allowed;
    for (const auto choice : choices) {
        if (v.raw.text == choice) return v.raw.text;
        allowed += (allowed.empty() ? "" : ", ") + std::string(choice);
    }
    fail(v, "expected one of " + allowed);
}

// A list of role names: a YAML sequence ([PLATFORM_ADMIN, SRE]) arrives joined by commas,
// as the environment variable is written. Upper-case names; at least one.
std::vector<std::string> to_role_list(const Value& v) {
    std::vector<std::string> roles;
    std::string_view rest = v.raw.text;
    const auto valid = [](std::string_view role) {
        if (role.empty() || role.size() > 64 || !(role.front() >= 'A' && role.front() <= 'Z')) return false;
        return std::all_of(role.begin(), role.end(),
                           [](char c) { return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; });
    };
    while (true) {
        const auto comma = rest.find(',');
        std::string_view role = rest.substr(0, comma);
        while (!role.empty() && role.front() == ' ') role.remove_prefix(1);
        while (!role.empty() && role.back() == ' ') role.remove_suffix(1);
        if (!valid(role)) fail(v, "expected a list of role names such as [PLATFORM_ADMIN] (A-Z, 0-9, _; at least one)");
        roles.emplace_back(role);
        if (comma == std::string_view::npos) break;
        rest.remove_prefix(comma + 1);
    }
    return roles;
}

// The one parser of admin.listen: "off", "host:port" or "[v6]:port".
std::optional<ListenAddress> to_listen(const Value& v) {
    const std::string& text = v.raw.text;
    if (text == "off") return std::nullopt;
    const auto colon = text.rfind(':');
    const auto port =
        colon == std::string::npos ? std::nullopt : parse_number<int>(std::string_view(text).substr(colon + 1));
    std::string host = colon == std::string::npos ? std::string() : text.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    if (host.empty() || !port || *port < 1 || *port > 65535) {
        fail(v, "expected off or host:port with a port from 1 to 65535, e.g. 127.0.0.1:8080");
    }
    return ListenAddress{std::move(host), *port};
}

double to_rate(const Value& v) {
    const auto value = parse_number<double>(v.raw.text);
    if (!value || !std::isfinite(*value) || *value <= 0.0 || *value > 100000.0) {
        fail(v, "expected a number greater than 0 and at most 100000");
    }
    return *value;
}

// --- the table of scalar settings ---------------------------------------------------------

struct Setting {
    std::string_view key;  // "outbox.poll_interval"
    std::string_view env;  // its OUTBOX_* override
    void (*apply)(Config&, const Value&);
};

const std::array kSettings{
    Setting{"database.url", "OUTBOX_DATABASE_URL", [](Config& c, const Value& v) { c.database.url = v.raw.text; }},
    Setting{"database.pool_size", "OUTBOX_DB_POOL_SIZE",
            [](Config& c, const Value& v) { c.database.pool_size = to_int(v, 1, 256); }},
    Setting{"database.connect_timeout", "OUTBOX_DATABASE_CONNECT_TIMEOUT",
            [](Config& c, const Value& v) { c.database.connect_timeout = to_duration(v, 1s, 10min); }},
    Setting{"database.keepalives_idle", "OUTBOX_DATABASE_KEEPALIVES_IDLE",
            [](Config& c, const Value& v) { c.database.keepalives_idle = to_duration(v, 1s, 1h); }},
    Setting{"database.tcp_user_timeout", "OUTBOX_DATABASE_TCP_USER_TIMEOUT",
            [](Config& c, const Value& v) { c.database.tcp_user_timeout = to_duration(v, 1s, 1h); }},
    Setting{"database.call_timeout", "OUTBOX_DATABASE_CALL_TIMEOUT",
            [](Config& c, const Value& v) { c.database.call_timeout = to_duration(v, 1s, 1h); }},
    Setting{"database.startup_timeout", "OUTBOX_DATABASE_STARTUP_TIMEOUT",
            [](Config& c, const Value& v) { c.database.startup_timeout = to_duration(v, 0ms, 24h); }},
    Setting{"outbox.enabled", "OUTBOX_ENABLED", [](Config& c, const Value& v) { c.outbox.enabled = to_bool(v); }},
    Setting{"outbox.poll_interval", "OUTBOX_POLL_INTERVAL",
            [](Config& c, const Value& v) { c.outbox.poll_interval = to_duration(v, 10ms, 1h); }},
    Setting{"outbox.batch_size", "OUTBOX_BATCH_SIZE",
            [](Config& c, const Value& v) { c.outbox.batch_size = to_int(v, 1, 1000); }},
    Setting{"outbox.lease_duration", "OUTBOX_LEASE_DURATION",
            [](Config& c, const Value& v) { c.outbox.lease_duration = to_duration(v, 1s, 24h); }},
    Setting{"outbox.max_attempts", "OUTBOX_MAX_ATTEMPTS",
            [](Config& c, const Value& v) { c.outbox.max_attempts = to_int(v, 1, 1000); }},
    Setting{"outbox.initial_backoff", "OUTBOX_INITIAL_BACKOFF",
            [](Config& c, const Value& v) { c.outbox.initial_backoff = to_duration(v, 0ms, 24h); }},
    // The lower bound (initial_backoff) is checked once both are known.
    Setting{"outbox.max_backoff", "OUTBOX_MAX_BACKOFF",
            [](Config& c, const Value& v) { c.outbox.max_backoff = to_duration(v, 0ms, 24h * 7); }},
    Setting{"outbox.concurrency", "OUTBOX_CONCURRENCY",
            [](Config& c, const Value& v) { c.outbox.concurrency = to_int(v, 1, 1024); }},
    Setting{"outbox.shutdown_timeout", "OUTBOX_SHUTDOWN_TIMEOUT",
            [](Config& c, const Value& v) { c.outbox.shutdown_timeout = to_duration(v, 0ms, 1h); }},
    Setting{"outbox.handler_timeout", "OUTBOX_HANDLER_TIMEOUT",
            [](Config& c, const Value& v) { c.outbox.handler_timeout = to_duration(v, 1ms, 24h); }},
    Setting{"outbox.abandon_grace", "OUTBOX_ABANDON_GRACE",
            [](Config& c, const Value& v) { c.outbox.abandon_grace = to_duration(v, 0ms, 1h); }},
    Setting{"outbox.max_abandoned_threads", "OUTBOX_MAX_ABANDONED_THREADS",
            [](Config& c, const Value& v) { c.outbox.max_abandoned_threads = to_int(v, 0, 1024); }},
    Setting{"outbox.retention", "OUTBOX_RETENTION",
            [](Config& c, const Value& v) { c.outbox.retention = to_duration(v, 1min, 24h * 3650); }},
    Setting{"outbox.require_registered_types", "OUTBOX_REQUIRE_REGISTERED_TYPES",
            [](Config& c, const Value& v) { c.outbox.require_registered_types = to_bool(v); }},
    Setting{"outbox.host_id", "OUTBOX_HOST_ID", [](Config& c, const Value& v) { c.outbox.host_id = v.raw.text; }},
    Setting{"plugins.dir", "OUTBOX_PLUGIN_DIR", [](Config& c, const Value& v) { c.plugins.dir = v.raw.text; }},
    Setting{"admin.listen", "OUTBOX_ADMIN_LISTEN",
            [](Config& c, const Value& v) {
                c.admin.listen_address = to_listen(v);
                c.admin.listen = v.raw.text;
            }},
    Setting{"admin.jwt_public_key_file", "OUTBOX_ADMIN_JWT_PUBLIC_KEY_FILE",
            [](Config& c, const Value& v) { c.admin.jwt_public_key_file = v.raw.text; }},
    Setting{"admin.jwt_issuer", "OUTBOX_ADMIN_JWT_ISSUER",
            [](Config& c, const Value& v) { c.admin.jwt_issuer = v.raw.text; }},
    Setting{"admin.jwt_audience", "OUTBOX_ADMIN_JWT_AUDIENCE",
            [](Config& c, const Value& v) { c.admin.jwt_audience = v.raw.text; }},
    Setting{"admin.jwt_max_lifetime", "OUTBOX_ADMIN_JWT_MAX_LIFETIME",
            [](Config& c, const Value& v) { c.admin.jwt_max_lifetime = to_duration(v, 1s, 24h); }},
    Setting{"admin.platform_roles", "OUTBOX_ADMIN_PLATFORM_ROLES",
            [](Config& c, const Value& v) { c.admin.platform_roles = to_role_list(v); }},
    Setting{"log.level", "OUTBOX_LOG_LEVEL",
            [](Config& c, const Value& v) {
                c.log.level = to_choice(v, {"trace", "debug", "info", "warn", "error"});
            }},
    Setting{"log.format", "OUTBOX_LOG_FORMAT",
            [](Config& c, const Value& v) {
                c.log.format = to_choice(v, {"text", "json"});
            }},
};

constexpr std::string_view kSecretEnv = "OUTBOX_ADMIN_JWT_SECRET";
constexpr std::size_t kMinSecretBytes = 32;  // HS256 keys shorter than its 256-bit output are guessable offline
constexpr std::array<std::string_view, 6> kSections{"database", "outbox", "plugins", "admin", "log", "handlers"};
constexpr std::array<std::string_view, 4> kHandlerKeys{"max_concurrency", "rate_limit_per_second", "timeout", "config"};

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
        // The one list-valued key: its items joined by commas, as its environment variable.
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
    if (const auto integer = parse_number<std::int64_t>(text)) return *integer;
    if (const auto number = parse_number<double>(text); number && std::isfinite(*number)) return *number;
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

HandlerSettings read_handler(const FileReader& file, const std::string& path, const YAML::Node& section) {
    HandlerSettings settings;
    const std::vector<std::string_view> allowed(kHandlerKeys.begin(), kHandlerKeys.end());
    file.each_entry(
        path, section,
        [&](const std::string& full, const std::string& name, const YAML::Node& key, const YAML::Node& value) {
            if (name == "config") {
                if (value.IsNull()) return;
                if (!value.IsMap())
                    fail_at(full, file.origin(key, value), "expected a mapping, got " + FileReader::kind(value));
                settings.config_json =
                    to_json(file, full, value).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
            } else if (name == "max_concurrency") {
                settings.max_concurrency = to_int(Value{full, file.scalar(full, key, value)}, 1, 10000);
            } else if (name == "rate_limit_per_second") {
                settings.rate_limit_per_second = to_rate(Value{full, file.scalar(full, key, value)});
            } else if (name == "timeout") {
                settings.timeout = to_duration(Value{full, file.scalar(full, key, value)}, 1ms, 24h);
            } else {
                fail_unknown(full, name, file.origin(key), allowed);
            }
        });
    return settings;
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
            for (const auto& setting : kSettings) {
                if (setting.key.substr(0, setting.key.find('.')) == section)
                    allowed.push_back(setting.key.substr(section.size() + 1));
            }
            file.each_entry(
                section, body,
                [&](const std::string& full, const std::string& name, const YAML::Node& key, const YAML::Node& value) {
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
    for (const auto& setting : kSettings) {
        if (auto value = env(std::string(setting.env))) {
            raw[std::string(setting.key)] = Raw{std::move(*value), std::string(setting.env)};
            from_env.insert(setting.key);
        }
    }
    for (const auto& setting : kSettings) {
        if (const auto it = raw.find(setting.key); it != raw.end()) {
            setting.apply(config, Value{setting.key, it->second, from_env.contains(setting.key)});
        }
    }
    if (auto secret = env(std::string(kSecretEnv))) config.admin.jwt_secret = std::move(*secret);
    check_admin_keys(config, raw);

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
