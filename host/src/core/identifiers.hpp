#pragma once

#include <string_view>

#include "outbox/sdk/plugin.hpp"

// The identifier rules, each written once: the plugin loader, the admin API, the CLI and
// the event-type registry all ask these.
namespace outbox::core {

namespace detail {
constexpr bool is_hex(char c, bool lower_only) noexcept {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (!lower_only && c >= 'A' && c <= 'F');
}
constexpr bool is_uuid(std::string_view text, bool lower_only) noexcept {
    if (text.size() != 36) return false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? text[i] != '-' : !is_hex(text[i], lower_only)) return false;
    }
    return true;
}
}  // namespace detail

/// An event id: 8-4-4-4-12 hex digits, either case.
constexpr bool is_uuid(std::string_view text) noexcept { return detail::is_uuid(text, false); }

/// An event id as PostgreSQL prints it: is_uuid with lower-case digits only.
constexpr bool is_lower_uuid(std::string_view text) noexcept { return detail::is_uuid(text, true); }

/// An event type: ^[A-Z][A-Za-z0-9]{0,99}$ (PascalCase letters and digits).
constexpr bool is_event_type(std::string_view text) noexcept {
    if (text.empty() || text.size() > 100 || !(text.front() >= 'A' && text.front() <= 'Z')) return false;
    for (const char c : text) {
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) return false;
    }
    return true;
}

/// An error code: ^[A-Z][A-Z0-9_]{0,63}$ (last_error_code's own check), e.g. HTTP_503.
constexpr bool is_error_code(std::string_view code) noexcept {
    if (code.empty() || code.size() > 64 || !(code.front() >= 'A' && code.front() <= 'Z')) return false;
    for (const char c : code) {
        if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
    }
    return true;
}

/// A handler name: ^[a-z0-9][a-z0-9._-]{0,99}$, the rule OUTBOX_PLUGIN checks at compile time.
constexpr bool is_handler_name(std::string_view name) noexcept {
    return sdk::detail::valid_handler_name(name.data(), name.size());
}

}  // namespace outbox::core
