#include "http_outcome.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <cstring>

#include <outbox/sdk/errors.hpp>

namespace category_classification {
namespace {

using std::chrono::milliseconds;

bool all_digits(std::string_view text) {
    return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::optional<long long> to_number(std::string_view digits) {
    long long value = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (error != std::errc{} || end != digits.data() + digits.size()) return std::nullopt;
    return value;
}

// IMF-fixdate, e.g. "Sun, 06 Nov 1994 08:49:37 GMT" (the only form servers must send).
std::optional<std::chrono::system_clock::time_point> parse_http_date(std::string_view text) {
    static constexpr std::array<const char*, 12> kMonths{"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                         "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    const std::string copy(text);
    char weekday[4] = {};
    char month_name[4] = {};
    int day = 0, year = 0, hour = 0, minute = 0, second = 0;
    char zone[4] = {};
    if (std::sscanf(copy.c_str(), "%3s, %d %3s %d %d:%d:%d %3s", weekday, &day, month_name, &year, &hour, &minute,
                    &second, zone) != 8 ||
        std::strcmp(zone, "GMT") != 0) {
        return std::nullopt;
    }
    const auto month = std::find_if(kMonths.begin(), kMonths.end(),
                                    [&](const char* m) { return std::strcmp(m, month_name) == 0; });
    if (month == kMonths.end()) return std::nullopt;
    const std::chrono::year_month_day date{std::chrono::year{year},
                                           std::chrono::month{static_cast<unsigned>(month - kMonths.begin() + 1)},
                                           std::chrono::day{static_cast<unsigned>(day)}};
    if (!date.ok() || hour > 23 || minute > 59 || second > 60 || hour < 0 || minute < 0 || second < 0) {
        return std::nullopt;
    }
    return std::chrono::sys_days{date} + std::chrono::hours{hour} + std::chrono::minutes{minute} +
           std::chrono::seconds{second};
}

}  // namespace

Endpoint parse_endpoint(std::string_view url, std::string_view key) {
    const auto fail = [&](const std::string& why) {
        throw InvalidConfig(std::string(key) + ": " + why + " (expected http://host[:port]/path)");
    };
    std::string_view rest;
    std::string scheme;
    if (url.starts_with("http://")) {
        scheme = "http://";
    } else if (url.starts_with("https://")) {
        scheme = "https://";
    } else {
        fail("not an http:// or https:// URL");
    }
    rest = url.substr(scheme.size());
    const auto authority_end = std::min(rest.find_first_of("/?#"), rest.size());
    const std::string_view authority = rest.substr(0, authority_end);
    if (authority.find('@') != std::string_view::npos) fail("credentials do not belong in the URL");
    const auto colon = authority.rfind(':');
    const std::string_view host = colon == std::string_view::npos ? authority : authority.substr(0, colon);
    if (host.empty()) fail("no host");
    if (colon != std::string_view::npos) {
        const auto port = to_number(authority.substr(colon + 1));
        if (!all_digits(authority.substr(colon + 1)) || !port || *port < 1 || *port > 65535) fail("bad port");
    }
    std::string path(rest.substr(authority_end));
    if (path.find('#') != std::string::npos) fail("a fragment is not allowed");
    if (path.empty() || path.front() == '?') path.insert(0, "/");
    return Endpoint{scheme + std::string(authority), path};
}

milliseconds parse_duration(const nlohmann::json& value, std::string_view key) {
    const auto fail = [&] {
        throw InvalidConfig(std::string(key) + ": expected a positive duration like 500ms, 10s or 2m (at most 1h)");
    };
    milliseconds result{0};
    if (value.is_number()) {
        const double seconds = value.get<double>();
        if (!(seconds > 0) || seconds > 3600) fail();
        result = milliseconds{static_cast<long long>(seconds * 1000)};
    } else if (value.is_string()) {
        const std::string text = value.get<std::string>();
        const auto unit_start = text.find_first_not_of("0123456789");
        if (unit_start == 0 || unit_start == std::string::npos) fail();
        const auto amount = to_number(std::string_view(text).substr(0, unit_start));
        const std::string unit = text.substr(unit_start);
        if (!amount || *amount > 3'600'000) fail();
        if (unit == "ms") {
            result = milliseconds{*amount};
        } else if (unit == "s") {
            result = std::chrono::seconds{*amount};
        } else if (unit == "m") {
            result = std::chrono::minutes{*amount};
        } else {
            fail();
        }
    } else {
        fail();
    }
    if (result.count() <= 0 || result > std::chrono::hours{1}) fail();
    return result;
}

std::optional<milliseconds> parse_retry_after(std::string_view value, std::chrono::system_clock::time_point now) {
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    if (value.empty()) return std::nullopt;
    milliseconds delay{0};
    if (all_digits(value)) {
        // A huge number of seconds is still "wait long": saturate rather than reject.
        const auto seconds = value.size() > 9 ? std::optional<long long>(999'999'999) : to_number(value);
        if (!seconds) return std::nullopt;
        delay = std::chrono::seconds{*seconds};
    } else {
        const auto when = parse_http_date(value);
        if (!when) return std::nullopt;
        delay = std::max(milliseconds{0}, std::chrono::duration_cast<milliseconds>(*when - now));
    }
    return std::min(delay, kMaxRetryAfter);
}

void throw_for_status(const httplib::Response& response) {
    const int status = response.status;
    const std::string code = "HTTP_" + std::to_string(status);
    const std::string message = "the remote answered HTTP " + std::to_string(status);
    // 408 and 409 say "not now" (request timeout, same key still in progress); 429 and 5xx
    // are the remote's own trouble. Everything else will not change by sending it again.
    if (status == 408 || status == 409 || status == 429 || (status >= 500 && status <= 599)) {
        std::optional<milliseconds> retry_after;
        if (response.has_header("Retry-After")) {
            retry_after = parse_retry_after(response.get_header_value("Retry-After"), std::chrono::system_clock::now());
        }
        throw outbox::sdk::RetryableError(code, message, retry_after);
    }
    throw outbox::sdk::NonRetryableError(code, message);
}

void throw_for_transport(httplib::Error error, std::chrono::steady_clock::duration elapsed, milliseconds timeout) {
    const std::string message = "no response: " + httplib::to_string(error);
    switch (error) {
        case httplib::Error::Connection:
            throw outbox::sdk::RetryableError("CONNECT_FAILED", message);
        case httplib::Error::ConnectionTimeout:
            throw outbox::sdk::RetryableError("TIMEOUT", message);
        case httplib::Error::Read:
        case httplib::Error::Write:
            // httplib reports a read that timed out like any other failed read; the clock
            // tells them apart (a dropped connection fails well before the timeout).
            if (elapsed + milliseconds{50} >= timeout) throw outbox::sdk::RetryableError("TIMEOUT", message);
            throw outbox::sdk::RetryableError("CONNECTION_LOST", message);
        case httplib::Error::SSLConnection:
        case httplib::Error::SSLLoadingCerts:
        case httplib::Error::SSLServerVerification:
            throw outbox::sdk::RetryableError("TLS_FAILED", message);
        default:
            throw outbox::sdk::RetryableError("REQUEST_FAILED", message);
    }
}

}  // namespace category_classification
