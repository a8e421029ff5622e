#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace outbox::admin {

/// One HTTP request as the endpoints see it, whatever the transport. Names of headers are
/// matched case-insensitively; query parameters are already percent-decoded.
struct HttpRequest {
    std::string method;  // as sent, upper case
    std::string path;    // without the query string
    std::vector<std::pair<std::string, std::string>> query;
    std::vector<std::pair<std::string, std::string>> headers;
    std::string body;

    [[nodiscard]] std::optional<std::string> header(std::string_view name) const;
    /// The first value of `name`; nullopt when absent.
    [[nodiscard]] std::optional<std::string> query_param(std::string_view name) const;
};

/// The answer the transport writes back.
struct HttpResponse {
    int status = 200;
    std::string content_type = "application/json";
    std::vector<std::pair<std::string, std::string>> headers;  // besides Content-Type and Content-Length
    std::string body;

    void set_header(std::string name, std::string value);
    void erase_header(std::string_view name);
    [[nodiscard]] std::optional<std::string> header(std::string_view name) const;
};

bool iequals(std::string_view a, std::string_view b) noexcept;

/// A JWS in compact serialisation as a header may carry it: three non-empty base64url
/// segments joined by two dots, at most `max_bytes` long. Anything else in a token header is
/// refused with 400 before it reaches a verifier, a log line or a JSON answer.
bool is_compact_jws(std::string_view text, std::size_t max_bytes = 8192) noexcept;

}  // namespace outbox::admin
