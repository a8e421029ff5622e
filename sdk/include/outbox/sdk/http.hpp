#pragma once
// Optional HTTP helper for handler plugins: one HTTP request bounded by ONE deadline for the
// whole call, and its outcome turned into what the host understands (a response, or a
// RetryableError / NonRetryableError with a documented code).
//
// Link the CMake target OutboxSdk::http (find_package(OutboxSdk 1 REQUIRED COMPONENTS http)
// outside the outboxd tree); it adds cpp-httplib (Debian: libcpp-httplib-dev). Plugins that
// do not include this header do not need cpp-httplib.
//
// Codes (error.code(), stored as last_error_code):
//   HTTP_<status>    a non-2xx answer: 408, 409, 429 and 5xx retryable (with Retry-After when
//                    sent), any other status non-retryable
//   TIMEOUT          no complete answer before the deadline (retryable)
//   CONNECT_FAILED   connection refused or not possible (retryable)
//   CONNECTION_LOST  an established connection broke before the answer was complete; the
//                    remote may have acted on the request (retryable)
//   TLS_FAILED       TLS handshake or certificate failure (retryable)
//   CANCELLED        ctx.cancelled() became true during the call (retryable; the host
//                    discards the result of a cancelled attempt anyway)
//   REQUEST_FAILED   any other client-side failure (retryable)
//   BAD_RESPONSE     from json_body(): a 2xx whose body is not JSON (retryable)

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "outbox/sdk/context.hpp"
#include "outbox/sdk/errors.hpp"

namespace outbox::sdk::http {

/// A configuration value a plugin cannot run with. Thrown by parse_endpoint() and
/// parse_duration(); let it escape the plugin's constructor and the host refuses the plugin
/// file with one log line naming the file (the message names the key, never a secret).
class InvalidConfig : public std::invalid_argument {
public:
    using std::invalid_argument::invalid_argument;
};

/// "http://host:port/path" split into what one request needs.
struct Endpoint {
    std::string origin;  ///< scheme://host[:port]
    std::string path;    ///< "/..." (never empty; may carry a query string)
};

/// One request. `path` is sent as is (relative to the origin). A non-empty body goes with
/// `content_type` unless `headers` already has a Content-Type.
struct Request {
    std::string method = "POST";  ///< GET, POST, PUT, PATCH or DELETE
    std::string path = "/";
    httplib::Headers headers;
    std::string body;
    std::string content_type = "application/json";
};

/// How close to the deadline a failed read counts as the deadline's doing.
inline constexpr std::chrono::milliseconds kLateMargin{50};

/// Longest Retry-After honoured: a misbehaving server must not park an event for days.
inline constexpr std::chrono::milliseconds kMaxRetryAfter{std::chrono::hours{1}};

namespace detail {

inline bool all_digits(std::string_view text) {
    return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

inline std::optional<long long> to_number(std::string_view digits) {
    long long value = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (error != std::errc{} || end != digits.data() + digits.size()) return std::nullopt;
    return value;
}

/// IMF-fixdate, e.g. "Sun, 06 Nov 1994 08:49:37 GMT" (the only form servers must send).
inline std::optional<std::chrono::system_clock::time_point> parse_http_date(std::string_view text) {
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
    if (month == kMonths.end() || day < 1 || day > 31) return std::nullopt;
    const std::chrono::year_month_day date{std::chrono::year{year},
                                           std::chrono::month{static_cast<unsigned>(month - kMonths.begin() + 1)},
                                           std::chrono::day{static_cast<unsigned>(day)}};
    if (!date.ok() || hour > 23 || minute > 59 || second > 60 || hour < 0 || minute < 0 || second < 0) {
        return std::nullopt;
    }
    return std::chrono::sys_days{date} + std::chrono::hours{hour} + std::chrono::minutes{minute} +
           std::chrono::seconds{second};
}

/// Why the watchdog ended a call early.
enum class Interruption { None, Deadline, Cancelled };

/// Ends one call at its deadline, or as soon as ctx.cancelled() is seen, by shutting the
/// client's socket down from a second thread. cpp-httplib's own timeouts are per socket
/// operation: a server trickling a byte now and then would keep a call alive for ever.
/// httplib::Client::stop() is the documented thread-safe way to do that.
class Watchdog {
public:
    Watchdog(httplib::Client& client, std::chrono::steady_clock::time_point deadline, const Context& ctx)
        : client_(client), deadline_(deadline), ctx_(ctx), thread_([this] { run(); }) {}
    ~Watchdog() { finish(); }
    Watchdog(const Watchdog&) = delete;
    Watchdog& operator=(const Watchdog&) = delete;
    Watchdog(Watchdog&&) = delete;
    Watchdog& operator=(Watchdog&&) = delete;

    /// Call once the request returned: stops the watchdog and says whether it cut the call.
    Interruption finish() {
        {
            const std::lock_guard lock(mutex_);
            done_ = true;
        }
        wake_.notify_all();
        if (thread_.joinable()) thread_.join();
        return interruption_;
    }

private:
    // ctx.cancelled() has no notification, so it is polled; 50ms is far below any timeout
    // worth configuring and costs nothing measurable.
    static constexpr std::chrono::milliseconds kCancelPoll{50};
    // stop() cannot reach a socket that is not made yet (it waits for a connect in progress,
    // bounded by the connect timeout, and a socket made after it would live on), so it is
    // repeated until the request returns.
    static constexpr std::chrono::milliseconds kStopRepeat{10};

    void run() {
        std::unique_lock lock(mutex_);
        while (!done_) {
            if (interruption_ == Interruption::None) {
                // The deadline first: the host's ctx.cancelled() also turns true at
                // ctx.deadline(), and running out of time is a TIMEOUT.
                if (std::chrono::steady_clock::now() >= deadline_) {
                    interruption_ = Interruption::Deadline;
                } else if (ctx_.cancelled()) {
                    interruption_ = Interruption::Cancelled;
                }
            }
            if (interruption_ != Interruption::None) {
                lock.unlock();
                client_.stop();
                lock.lock();
                wake_.wait_for(lock, kStopRepeat, [this] { return done_; });
                continue;
            }
            const auto next = std::min(deadline_, std::chrono::steady_clock::now() + kCancelPoll);
            wake_.wait_until(lock, next, [this] { return done_; });
        }
    }

    httplib::Client& client_;
    const std::chrono::steady_clock::time_point deadline_;
    const Context& ctx_;
    std::mutex mutex_;
    std::condition_variable wake_;
    bool done_ = false;
    Interruption interruption_ = Interruption::None;
    std::thread thread_;  // last: starts once everything it uses is constructed
};

}  // namespace detail

/// Parses an http:// or https:// URL (no credentials, no fragment). Throws InvalidConfig
/// whose message starts with `key`.
inline Endpoint parse_endpoint(std::string_view url, std::string_view key) {
    const auto fail = [&](const std::string& why) {
        throw InvalidConfig(std::string(key) + ": " + why + " (expected http://host[:port]/path)");
    };
    std::string scheme;
    if (url.starts_with("http://")) {
        scheme = "http://";
    } else if (url.starts_with("https://")) {
        scheme = "https://";
    } else {
        fail("not an http:// or https:// URL");
    }
    const std::string_view rest = url.substr(scheme.size());
    const auto authority_end = std::min(rest.find_first_of("/?#"), rest.size());
    const std::string_view authority = rest.substr(0, authority_end);
    if (authority.find('@') != std::string_view::npos) fail("credentials do not belong in the URL");
    const auto colon = authority.rfind(':');
    const std::string_view host = colon == std::string_view::npos ? authority : authority.substr(0, colon);
    if (host.empty()) fail("no host");
    if (colon != std::string_view::npos) {
        const auto port = detail::to_number(authority.substr(colon + 1));
        if (!detail::all_digits(authority.substr(colon + 1)) || !port || *port < 1 || *port > 65535) fail("bad port");
    }
    std::string path(rest.substr(authority_end));
    if (path.find('#') != std::string::npos) fail("a fragment is not allowed");
    if (path.empty() || path.front() == '?') path.insert(0, "/");
    return Endpoint{scheme + std::string(authority), path};
}

/// A duration written as "250ms", "10s", "5m" or a number of seconds; positive, at most 1h.
/// Throws InvalidConfig whose message starts with `key`.
inline std::chrono::milliseconds parse_duration(const nlohmann::json& value, std::string_view key) {
    using std::chrono::milliseconds;
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
        const auto amount = detail::to_number(std::string_view(text).substr(0, unit_start));
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

/// Retry-After as delay-seconds or an HTTP-date (IMF-fixdate) relative to `now`; nullopt
/// when empty or unparsable. Never negative (a date in the past is 0), capped at
/// kMaxRetryAfter. Pure; thread-safe.
inline std::optional<std::chrono::milliseconds> parse_retry_after(std::string_view value,
                                                                  std::chrono::system_clock::time_point now) {
    using std::chrono::milliseconds;
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    if (value.empty()) return std::nullopt;
    milliseconds delay{0};
    if (detail::all_digits(value)) {
        // A huge number of seconds is still "wait long": saturate rather than reject.
        const auto seconds = value.size() > 9 ? std::optional<long long>(999'999'999) : detail::to_number(value);
        if (!seconds) return std::nullopt;
        delay = std::chrono::seconds{*seconds};
    } else {
        const auto when = detail::parse_http_date(value);
        if (!when) return std::nullopt;
        delay = std::max(milliseconds{0}, std::chrono::duration_cast<milliseconds>(*when - now));
    }
    return std::min(delay, kMaxRetryAfter);
}

/// True for the statuses that mean "not now": 408 (request timeout), 409 (the same
/// idempotency key still in progress), 429 and every 5xx.
inline bool retryable_status(int status) {
    return status == 408 || status == 409 || status == 429 || (status >= 500 && status <= 599);
}

/// Throws the error for a non-2xx answer: RetryableError("HTTP_<status>", ..., Retry-After)
/// for retryable_status(), NonRetryableError("HTTP_<status>") for any other status.
/// `retry_after` is the raw header value, if any.
[[noreturn]] inline void throw_for_status(int status, const std::optional<std::string>& retry_after,
                                          std::chrono::system_clock::time_point now) {
    const std::string code = "HTTP_" + std::to_string(status);
    const std::string message = "the remote answered HTTP " + std::to_string(status);
    if (retryable_status(status)) {
        throw RetryableError(code, message, retry_after ? parse_retry_after(*retry_after, now) : std::nullopt);
    }
    throw NonRetryableError(code, message);
}

/// Throws the retryable error for a request that got no complete answer. `interruption` says
/// whether the watchdog cut it; `deadline_passed` whether the deadline had passed when the
/// client gave up (httplib reports a read that timed out like any other failed read).
[[noreturn]] inline void throw_for_transport(httplib::Error error, detail::Interruption interruption,
                                             bool deadline_passed) {
    const std::string message = "no response: " + httplib::to_string(error);
    if (interruption == detail::Interruption::Cancelled) throw RetryableError("CANCELLED", "the call was cancelled");
    if (interruption == detail::Interruption::Deadline) throw RetryableError("TIMEOUT", message);
    switch (error) {
        case httplib::Error::Connection:
            throw RetryableError(deadline_passed ? "TIMEOUT" : "CONNECT_FAILED", message);
        case httplib::Error::ConnectionTimeout:
            throw RetryableError("TIMEOUT", message);
        case httplib::Error::Read:
        case httplib::Error::Write:
            throw RetryableError(deadline_passed ? "TIMEOUT" : "CONNECTION_LOST", message);
        case httplib::Error::SSLConnection:
        case httplib::Error::SSLLoadingCerts:
        case httplib::Error::SSLServerVerification:
            throw RetryableError("TLS_FAILED", message);
        default:
            throw RetryableError("REQUEST_FAILED", message);
    }
}

/// Sends `request` to `origin` (scheme://host[:port]) and returns the answer when its
/// status is 2xx; throws RetryableError / NonRetryableError with the codes listed at the top
/// of this file otherwise.
///
/// The whole call — connect, send, every byte of the answer — ends at
/// min(now + timeout, ctx.deadline()); a call already out of time throws TIMEOUT without
/// connecting, and one whose ctx.cancelled() is already true throws CANCELLED. Redirects are
/// not followed (a 3xx is non-retryable). One connection per call, closed afterwards.
/// Not bounded: host name resolution (getaddrinfo cannot be interrupted); use addresses or a
/// local resolver for remotes whose DNS may hang.
///
/// Sends ctx.trace() as the `traceparent` and `tracestate` headers (when the publisher gave
/// a trace context and `request.headers` does not set them already), so the remote call
/// joins the publisher's trace.
///
/// Thread-safe: each call has its own client; runs one short-lived watchdog thread.
inline httplib::Response send(Context& ctx, const std::string& origin, const Request& request,
                              std::chrono::milliseconds timeout) {
    using Clock = std::chrono::steady_clock;
    const Clock::time_point deadline = std::min(Clock::now() + timeout, ctx.deadline());
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) throw RetryableError("TIMEOUT", "no time left before the deadline");
    if (ctx.cancelled()) throw RetryableError("CANCELLED", "the call was cancelled before it started");

    httplib::Client client(origin);
    if (!client.is_valid()) throw RetryableError("REQUEST_FAILED", "the origin is not a usable URL");
    // Per-operation limits no longer than the whole call: the watchdog ends the call at the
    // deadline, these keep a single stuck operation from outliving it.
    client.set_connection_timeout(left);
    client.set_read_timeout(left);
    client.set_write_timeout(left);

    httplib::Request req;
    req.method = request.method;
    req.path = request.path;
    req.headers = request.headers;
    if (const TraceContext& trace = ctx.trace(); !trace.traceparent.empty() && !req.has_header("traceparent")) {
        req.headers.emplace("traceparent", trace.traceparent);
        if (!trace.tracestate.empty() && !req.has_header("tracestate")) req.headers.emplace("tracestate", trace.tracestate);
    }
    if (!request.body.empty()) {
        req.body = request.body;
        if (!req.has_header("Content-Type")) req.headers.emplace("Content-Type", request.content_type);
    }

    detail::Interruption interruption = detail::Interruption::None;
    httplib::Result result = [&] {
        detail::Watchdog watchdog(client, deadline, ctx);
        httplib::Result sent = client.send(req);
        interruption = watchdog.finish();
        return sent;
    }();
    // An answer that was complete when the watchdog fired is still an answer.
    if (!result) throw_for_transport(result.error(), interruption, Clock::now() + kLateMargin >= deadline);
    const httplib::Response& response = *result;
    if (response.status < 200 || response.status > 299) {
        std::optional<std::string> retry_after;
        if (response.has_header("Retry-After")) retry_after = response.get_header_value("Retry-After");
        throw_for_status(response.status, retry_after, std::chrono::system_clock::now());
    }
    return response;
}

/// send() with `endpoint.path` as the request path: POSTs `body` as JSON.
inline httplib::Response post_json(Context& ctx, const Endpoint& endpoint, const httplib::Headers& headers,
                                   const std::string& body, std::chrono::milliseconds timeout) {
    Request request;
    request.path = endpoint.path;
    request.headers = headers;
    request.body = body;
    return send(ctx, endpoint.origin, request, timeout);
}

/// The body of a 2xx answer as JSON; throws RetryableError("BAD_RESPONSE") when it is not
/// JSON (a garbled 2xx usually comes from a proxy or a deploy in progress).
inline nlohmann::json json_body(const httplib::Response& response) {
    nlohmann::json body = nlohmann::json::parse(response.body, nullptr, false);
    if (body.is_discarded()) throw RetryableError("BAD_RESPONSE", "the answer is not JSON");
    return body;
}

}  // namespace outbox::sdk::http
