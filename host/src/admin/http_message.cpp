#include "admin/http_message.hpp"

#include <algorithm>
#include <cctype>

namespace outbox::admin {

bool iequals(std::string_view a, std::string_view b) noexcept {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
           });
}

bool is_compact_jws(std::string_view text, std::size_t max_bytes) noexcept {
    if (text.empty() || text.size() > max_bytes) return false;
    int dots = 0;
    std::size_t segment = 0;
    for (const char c : text) {
        if (c == '.') {
            if (segment == 0) return false;
            ++dots;
            segment = 0;
            continue;
        }
        const bool base64url = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
        if (!base64url) return false;
        ++segment;
    }
    return dots == 2 && segment > 0;
}

std::optional<std::string> HttpRequest::header(std::string_view name) const {
    for (const auto& [key, value] : headers) {
        if (iequals(key, name)) return value;
    }
    return std::nullopt;
}

std::optional<std::string> HttpRequest::query_param(std::string_view name) const {
    for (const auto& [key, value] : query) {
        if (key == name) return value;
    }
    return std::nullopt;
}

void HttpResponse::set_header(std::string name, std::string value) {
    erase_header(name);
    headers.emplace_back(std::move(name), std::move(value));
}

void HttpResponse::erase_header(std::string_view name) {
    std::erase_if(headers, [&](const auto& h) { return iequals(h.first, name); });
}

std::optional<std::string> HttpResponse::header(std::string_view name) const {
    for (const auto& [key, value] : headers) {
        if (iequals(key, name)) return value;
    }
    return std::nullopt;
}

}  // namespace outbox::admin
