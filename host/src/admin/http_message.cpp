#include "admin/http_message.hpp"

#include <algorithm>
#include <cctype>

namespace outbox::admin {

bool iequals(std::string_view a, std::string_view b) noexcept {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
           });
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
