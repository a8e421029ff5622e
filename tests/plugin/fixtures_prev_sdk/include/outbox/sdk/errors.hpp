#pragma once

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>

#include "outbox/sdk/visibility.hpp"

namespace outbox::sdk {

/// Throw from Handler::handle() when the attempt failed but a later attempt may succeed
/// (HTTP 429/503/5xx, timeouts, refused connections). The event goes to RETRY_WAIT with
/// exponential backoff, or to REVIEW_REQUIRED when its attempts are used up.
///
/// `code` is a short upper-case token (`HTTP_503`, `TIMEOUT`) stored in
/// event_publication.last_error_code and in logs: never put payload data, tokens or
/// remote response bodies in it. `message` is for the plugin's own diagnostics; the host
/// never logs or stores it. `retry_after` asks for the next attempt no sooner than that
/// (e.g. from an HTTP Retry-After header); the host uses the later of it and the backoff.
class OUTBOX_SDK_VISIBLE RetryableError : public std::runtime_error {
public:
    RetryableError(std::string code, std::string message,
                   std::optional<std::chrono::milliseconds> retry_after = std::nullopt)
        : std::runtime_error(std::move(message)), code_(std::move(code)), retry_after_(retry_after) {}

    [[nodiscard]] const std::string& code() const noexcept { return code_; }
    [[nodiscard]] std::optional<std::chrono::milliseconds> retry_after() const noexcept { return retry_after_; }

private:
    std::string code_;
    std::optional<std::chrono::milliseconds> retry_after_;
};

/// Throw from Handler::handle() when retrying cannot help (HTTP 400/401/403/404/422, a
/// payload the handler cannot use). The event goes straight to REVIEW_REQUIRED, where an
/// operator can re-drive it after fixing the cause. Same rules for `code` and `message`.
class OUTBOX_SDK_VISIBLE NonRetryableError : public std::runtime_error {
public:
    NonRetryableError(std::string code, std::string message)
        : std::runtime_error(std::move(message)), code_(std::move(code)) {}

    [[nodiscard]] const std::string& code() const noexcept { return code_; }

private:
    std::string code_;
};

/// How a failed attempt is treated; returned by Handler::classify().
struct Disposition {
    enum class Kind { Retry, Review };
    Kind kind = Kind::Retry;
    std::string code = "UNCLASSIFIED";  ///< safe upper-case token, as for RetryableError
    std::optional<std::chrono::milliseconds> retry_after;

    static Disposition retry(std::string code, std::optional<std::chrono::milliseconds> after = std::nullopt) {
        return Disposition{Kind::Retry, std::move(code), after};
    }
    static Disposition review(std::string code) { return Disposition{Kind::Review, std::move(code), std::nullopt}; }
};

}  // namespace outbox::sdk
