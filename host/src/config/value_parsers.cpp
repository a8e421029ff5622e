#include "config/value_parsers.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <nlohmann/json.hpp>
#include <utility>

#include "core/duration.hpp"

namespace outbox::config {
namespace {

using core::format_duration;
using core::parse_duration;

std::string shown_value(std::string_view text) {
    constexpr std::size_t kMaxShown = 120;  // a pasted PEM or URL must not flood the one-line error
    std::string shown(text.substr(0, kMaxShown));
    if (text.size() > kMaxShown) shown += "...";
    // JSON escaping keeps the message on one line whatever the value contains.
    return nlohmann::json(shown).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

[[noreturn]] void fail(std::string_view key, const Raw& raw, std::string_view allowed) {
    throw ConfigError(std::string(key) + " = " + shown_value(raw.text) + " (from " + raw.origin +
                      "): " + std::string(allowed));
}

[[noreturn]] void fail(const Value& v, std::string_view allowed) { fail(v.key, v.raw, allowed); }

[[noreturn]] void fail_at(std::string_view key, std::string_view origin, std::string_view problem) {
    throw ConfigError(std::string(key) + " (from " + std::string(origin) + "): " + std::string(problem));
}

std::string lower(std::string_view text) {
    std::string out(text);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
}

// --- conversions ------------------------------------------------------------------------

milliseconds to_duration(const Value& v, milliseconds lo, milliseconds hi) {
    const std::string range = "from " + format_duration(lo) + " to " + format_duration(hi);
    const auto value = parse_duration(v.raw.text);
    if (!value) fail(v, "expected a duration such as 250ms, 1s, 5m (units ms, s, m, h, d), " + range);
    if (*value < lo || *value > hi) fail(v, "expected a duration " + range);
    return *value;
}

int to_int(const Value& v, int lo, int hi) {
    const auto value = core::parse_number<long long>(v.raw.text);
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

std::vector<std::string> to_roles(const Value& v) {
    std::vector<std::string> roles;
    std::string_view text = v.raw.text;
    while (true) {
        const auto comma = text.find(',');
        std::string_view role = text.substr(0, comma);
        while (!role.empty() && role.front() == ' ') role.remove_prefix(1);
        while (!role.empty() && role.back() == ' ') role.remove_suffix(1);
        const bool valid = !role.empty() && role.size() <= 64 && std::all_of(role.begin(), role.end(), [](char c) {
            return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
        });
        if (!valid) fail(v, "expected a list of role names (letters, digits, _ and -), e.g. [PLATFORM_ADMIN]");
        // Every tenant's tokens carry these: listing one would give each company's admins
        // fleet-wide pause and resume.
        if (role == "ADMIN" || role == "HR" || role == "VIEWER") {
            fail(v, "'" + std::string(role) +
                        "' is a company role (ADMIN, HR, VIEWER); a platform role must be one no tenant's token "
                        "carries, e.g. PLATFORM_ADMIN");
        }
        roles.emplace_back(role);
        if (comma == std::string_view::npos) break;
        text.remove_prefix(comma + 1);
    }
    return roles;
}

// An HTTP header name (RFC 9110 token characters), or empty for none.
std::string to_header_name(const Value& v) {
    const std::string& text = v.raw.text;
    const bool valid = text.size() <= 100 && std::all_of(text.begin(), text.end(), [](char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
    });
    if (!valid) fail(v, "expected an HTTP header name of at most 100 letters, digits, - and _ (or empty for none)");
    return text;
}

std::string to_choice(const Value& v, std::initializer_list<std::string_view> choices) {
    std::string allowed;
    for (const auto choice : choices) {
        if (v.raw.text == choice) return v.raw.text;
        allowed += (allowed.empty() ? "" : ", ") + std::string(choice);
    }
    fail(v, "expected one of " + allowed);
}

// The one parser of admin.listen: "off", "host:port" or "[v6]:port".
std::optional<ListenAddress> to_listen(const Value& v) {
    const std::string& text = v.raw.text;
    if (text == "off") return std::nullopt;
    const auto colon = text.rfind(':');
    const auto port =
        colon == std::string::npos ? std::nullopt : core::parse_number<int>(std::string_view(text).substr(colon + 1));
    std::string host = colon == std::string::npos ? std::string() : text.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    if (host.empty() || !port || *port < 1 || *port > 65535) {
        fail(v, "expected off or host:port with a port from 1 to 65535, e.g. 127.0.0.1:8080");
    }
    return ListenAddress{std::move(host), *port};
}

double to_rate(const Value& v) {
    const auto value = core::parse_number<double>(v.raw.text);
    if (!value || !std::isfinite(*value) || *value <= 0.0 || *value > 100000.0) {
        fail(v, "expected a number greater than 0 and at most 100000");
    }
    return *value;
}

double to_ratio(const Value& v) {
    const auto value = core::parse_number<double>(v.raw.text);
    if (!value || !std::isfinite(*value) || *value <= 0.0 || *value > 1.0) {
        fail(v, "expected a number greater than 0 and at most 1");
    }
    return *value;
}

// An OTLP/HTTP endpoint: plain http (a collector or agent next to the host; TLS is the
// collector's job), a host, a port and a path. Empty: off.
std::string to_otlp_endpoint(const Value& v) {
    const std::string& text = v.raw.text;
    if (text.empty()) return text;
    // Read by hand, not with std::regex: its recursion grows with the input's length.
    const auto bad = [&] {
        fail(v, "expected an http://host:port/path URL (e.g. http://127.0.0.1:4318/v1/traces); https is not "
                "supported: send to a collector on the host or its network");
    };
    constexpr std::string_view kScheme = "http://";
    if (text.size() > 2048 || text.compare(0, kScheme.size(), kScheme) != 0) bad();
    const std::string_view rest = std::string_view(text).substr(kScheme.size());
    const auto slash = rest.find('/');
    if (slash == std::string_view::npos) bad();
    const std::string_view authority = rest.substr(0, slash);
    const std::string_view path = rest.substr(slash);
    const auto colon = authority.rfind(':');
    if (colon == std::string_view::npos || colon == 0) bad();
    const std::string_view host = authority.substr(0, colon);
    const std::string_view port = authority.substr(colon + 1);
    const bool bracketed = host.size() > 2 && host.front() == '[' && host.back() == ']';
    const bool host_ok =
        bracketed ? std::all_of(host.begin() + 1, host.end() - 1,
                                [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) || c == ':'; })
                  : std::all_of(host.begin(), host.end(), [](char c) {
                        return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-';
                    });
    int port_number = 0;
    const auto [end, error] = std::from_chars(port.data(), port.data() + port.size(), port_number);
    const bool path_ok = std::all_of(path.begin(), path.end(), [](char c) { return c >= '!' && c <= '~'; });
    if (!host_ok || port.empty() || port.size() > 5 || error != std::errc() || end != port.data() + port.size() ||
        port_number < 1 || port_number > 65535 || !path_ok) {
        bad();
    }
    return text;
}

std::string to_service_name(const Value& v) {
    const std::string& text = v.raw.text;
    if (text.empty() || text.size() > 100 ||
        !std::all_of(text.begin(), text.end(), [](char c) { return c >= 0x20 && c <= 0x7e; })) {
        fail(v, "expected 1 to 100 printable ASCII characters");
    }
    return text;
}

}  // namespace outbox::config
