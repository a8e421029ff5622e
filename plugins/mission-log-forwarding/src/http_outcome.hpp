#pragma once
// Turning one HTTP exchange into what the outboxd host understands: success, or a
// RetryableError / NonRetryableError with a safe code. Kept inside this plugin folder
// (not shared with other plugins) so the folder builds on its own when copied.

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <httplib.h>
#include <nlohmann/json.hpp>

namespace mission_log_forwarding {

/// A configuration value the plugin cannot run with. Thrown from the constructor, which
/// makes the host refuse the plugin file with one log line.
class InvalidConfig : public std::invalid_argument {
public:
    using std::invalid_argument::invalid_argument;
};

/// "http://host:port/path" split into what httplib::Client wants.
struct Endpoint {
    std::string origin;  ///< scheme://host[:port]
    std::string path;    ///< "/..." (never empty)
};

/// Parses an http:// or https:// URL; throws InvalidConfig naming `key`.
Endpoint parse_endpoint(std::string_view url, std::string_view key);

/// A duration written as "250ms", "10s", "5m" or a number of seconds; must be positive.
/// Throws InvalidConfig naming `key`.
std::chrono::milliseconds parse_duration(const nlohmann::json& value, std::string_view key);

/// Longest Retry-After honoured: a misbehaving server must not park an event for days.
inline constexpr std::chrono::milliseconds kMaxRetryAfter{std::chrono::hours{1}};

/// Retry-After as delay-seconds or an HTTP-date (IMF-fixdate), relative to `now`; nullopt
/// when absent or unparsable. Capped at kMaxRetryAfter, never negative.
std::optional<std::chrono::milliseconds> parse_retry_after(std::string_view value,
                                                           std::chrono::system_clock::time_point now);

/// Throws the error for a non-2xx response: 408/409/429/5xx retryable (with Retry-After
/// when the response carries one), any other status non-retryable; code HTTP_<status>.
[[noreturn]] void throw_for_status(const httplib::Response& response);

/// Throws the retryable error for a request that got no complete response: TIMEOUT when
/// the connect timed out or a read/write failed at the timeout, CONNECT_FAILED when the
/// connection was refused or could not be made, CONNECTION_LOST when an established
/// connection broke before the response was complete (the remote may have acted on it).
[[noreturn]] void throw_for_transport(httplib::Error error, std::chrono::steady_clock::duration elapsed,
                                      std::chrono::milliseconds timeout);

}  // namespace mission_log_forwarding
