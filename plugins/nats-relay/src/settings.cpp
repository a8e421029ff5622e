#include "settings.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

namespace nats_relay {
namespace {

using std::chrono::milliseconds;

constexpr std::size_t kMaxSubjectLength = 1024;

bool plain_token_char(char c) {
    const auto u = static_cast<unsigned char>(c);
    return u > 0x20 && u != 0x7f && c != '.' && c != '*' && c != '>';
}

std::vector<std::string_view> tokens(std::string_view subject) {
    std::vector<std::string_view> parts;
    std::size_t start = 0;
    while (true) {
        const auto dot = subject.find('.', start);
        parts.push_back(subject.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
        if (dot == std::string_view::npos) return parts;
        start = dot + 1;
    }
}

// "250ms", "5s", "2m" or a number of seconds; positive, at most 1 minute: a publish
// acknowledgement that takes longer is not coming.
milliseconds parse_timeout(const nlohmann::json& value) {
    const auto fail = [] {
        throw InvalidConfig("config.publish_timeout: expected a positive duration like 500ms, 5s or 1m (at most 1m)");
    };
    milliseconds result{0};
    if (value.is_number()) {
        const double seconds = value.get<double>();
        if (!(seconds > 0) || seconds > 60) fail();
        result = milliseconds{static_cast<long long>(seconds * 1000)};
    } else if (value.is_string()) {
        const std::string text = value.get<std::string>();
        const auto unit_start = text.find_first_not_of("0123456789");
        if (unit_start == 0 || unit_start == std::string::npos || unit_start > 7) fail();
        const long long amount = std::stoll(text.substr(0, unit_start));
        const std::string unit = text.substr(unit_start);
        if (unit == "ms") {
            result = milliseconds{amount};
        } else if (unit == "s") {
            result = std::chrono::seconds{amount};
        } else if (unit == "m") {
            result = std::chrono::minutes{amount};
        } else {
            fail();
        }
    } else {
        fail();
    }
    if (result.count() <= 0 || result > std::chrono::minutes{1}) fail();
    return result;
}

void check_server_url(const std::string& url) {
    const auto fail = [&](const std::string& why) {
        throw InvalidConfig("config.servers: " + why + " (expected nats://host:port or tls://host:port)");
    };
    const auto scheme_end = url.find("://");
    if (scheme_end == std::string::npos) fail("not a URL");
    const std::string scheme = url.substr(0, scheme_end);
    if (scheme != "nats" && scheme != "tls") fail("the scheme must be nats or tls");
    const std::string authority = url.substr(scheme_end + 3);
    // User and password (or a token) in the URL would end up wherever URLs are shown.
    if (authority.find('@') != std::string::npos) fail("credentials do not belong in the URL; use token_env or credentials_file");
    if (authority.empty() || authority.front() == ':' || authority.find_first_of("/?# \t") != std::string::npos) {
        fail("no host, or a path");
    }
}

// Stream names may not hold what subjects and file paths use as separators.
bool valid_stream_name(const std::string& name) {
    return !name.empty() && name.size() <= 255 &&
           std::all_of(name.begin(), name.end(), [](char c) { return plain_token_char(c) && c != '/' && c != '\\'; });
}

bool valid_event_type(const std::string& type) {
    return !type.empty() && type.size() <= 100 && type.front() >= 'A' && type.front() <= 'Z' &&
           std::all_of(type.begin(), type.end(), [](char c) {
               return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
           });
}

void check_template(const std::string& subject_template) {
    const auto fail = [](const std::string& why) {
        throw InvalidConfig("config.subject_template: " + why +
                            " (placeholders: <company>, <event_type>; e.g. outbox.<company>.<event_type>)");
    };
    std::string rest = subject_template;
    for (std::size_t open = rest.find('<'); open != std::string::npos; open = rest.find('<', open)) {
        const auto close = rest.find('>', open);
        if (close == std::string::npos) fail("an unclosed '<'");
        const std::string name = rest.substr(open, close - open + 1);
        if (name != "<company>" && name != "<event_type>") fail("unknown placeholder " + name);
        rest.replace(open, close - open + 1, "X");
    }
    if (!valid_publish_subject(rest)) fail("not a valid subject (empty tokens, wildcards or whitespace)");
}

std::vector<std::string> string_list(const nlohmann::json& config, const char* key, const std::string& what) {
    if (!config.contains(key) || !config[key].is_array() || config[key].empty()) {
        throw InvalidConfig(std::string("config.") + key + ": required, a non-empty list of " + what);
    }
    std::vector<std::string> items;
    for (const auto& item : config[key]) {
        if (!item.is_string()) throw InvalidConfig(std::string("config.") + key + ": every entry must be text");
        items.push_back(item.get<std::string>());
    }
    return items;
}

}  // namespace

bool valid_publish_subject(std::string_view subject) {
    if (subject.empty() || subject.size() > kMaxSubjectLength) return false;
    for (const auto token : tokens(subject)) {
        if (token.empty() || !std::all_of(token.begin(), token.end(), plain_token_char)) return false;
    }
    return true;
}

bool subject_matches(std::string_view pattern, std::string_view subject) {
    const auto want = tokens(pattern);
    const auto have = tokens(subject);
    for (std::size_t i = 0; i < want.size(); ++i) {
        if (want[i] == ">") return i + 1 == want.size() && have.size() > i;
        if (i >= have.size()) return false;
        if (want[i] != "*" && want[i] != have[i]) return false;
    }
    return want.size() == have.size();
}

std::optional<std::string> render_subject(const std::string& subject_template, const std::string& company,
                                          const std::string& event_type) {
    if (company.empty() || !std::all_of(company.begin(), company.end(), plain_token_char)) return std::nullopt;
    std::string subject;
    for (std::size_t i = 0; i < subject_template.size();) {
        if (subject_template.compare(i, 9, "<company>") == 0) {
            subject += company;
            i += 9;
        } else if (subject_template.compare(i, 12, "<event_type>") == 0) {
            subject += event_type;
            i += 12;
        } else {
            subject += subject_template[i++];
        }
    }
    if (!valid_publish_subject(subject)) return std::nullopt;
    return subject;
}

Settings parse_settings(const std::string& config_json) {
    const nlohmann::json config = nlohmann::json::parse(config_json, nullptr, false);
    if (!config.is_object()) throw InvalidConfig("config: expected an object");
    static const std::set<std::string> kKeys{"servers",  "token_env",        "credentials_file", "stream",
                                             "subject_template", "event_types", "publish_timeout"};
    for (const auto& [key, value] : config.items()) {
        if (key == "token") {
            throw InvalidConfig("config.token: the token never goes in the configuration; name its environment "
                                "variable with token_env");
        }
        if (!kKeys.contains(key)) {
            throw InvalidConfig("config." + key + ": unknown key (allowed: servers, token_env, credentials_file, "
                                "stream, subject_template, event_types, publish_timeout)");
        }
    }
    Settings settings;
    settings.servers = string_list(config, "servers", "nats://host:port URLs");
    for (const auto& url : settings.servers) check_server_url(url);

    if (config.contains("token_env") && config.contains("credentials_file")) {
        throw InvalidConfig("config: give token_env or credentials_file, not both");
    }
    if (config.contains("token_env")) {
        if (!config["token_env"].is_string() || config["token_env"].get<std::string>().empty()) {
            throw InvalidConfig("config.token_env: the name of the environment variable holding the token");
        }
        const std::string variable = config["token_env"].get<std::string>();
        // Read once: an unset variable is a deployment error to refuse at start-up.
        const char* token = std::getenv(variable.c_str());
        if (token == nullptr || *token == '\0') {
            throw InvalidConfig("config.token_env: environment variable " + variable + " is not set or empty");
        }
        settings.token = token;
    }
    if (config.contains("credentials_file")) {
        if (!config["credentials_file"].is_string() || config["credentials_file"].get<std::string>().empty()) {
            throw InvalidConfig("config.credentials_file: the path of a NATS .creds file");
        }
        settings.credentials_file = config["credentials_file"].get<std::string>();
        if (!std::ifstream(settings.credentials_file).good()) {
            throw InvalidConfig("config.credentials_file: " + settings.credentials_file + " cannot be read");
        }
    }

    if (!config.contains("stream") || !config["stream"].is_string() ||
        !valid_stream_name(config["stream"].get<std::string>())) {
        throw InvalidConfig("config.stream: required, a JetStream stream name (no whitespace, '.', '*', '>', '/')");
    }
    settings.stream = config["stream"].get<std::string>();

    settings.subject_template = kDefaultSubjectTemplate;
    if (config.contains("subject_template")) {
        if (!config["subject_template"].is_string()) throw InvalidConfig("config.subject_template: expected text");
        settings.subject_template = config["subject_template"].get<std::string>();
    }
    check_template(settings.subject_template);

    settings.event_types = string_list(config, "event_types", "event types");
    for (const auto& type : settings.event_types) {
        if (!valid_event_type(type)) {
            throw InvalidConfig("config.event_types: '" + type +
                                "' is not an event type (1-100 letters and digits, starting with an upper-case letter)");
        }
    }
    if (config.contains("publish_timeout")) settings.publish_timeout = parse_timeout(config["publish_timeout"]);
    return settings;
}

}  // namespace nats_relay
