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

}  // namespace outbox::admin
