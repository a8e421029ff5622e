#pragma once

#include <optional>
#include <string_view>

namespace outbox::operations {

/// Number of Unicode code points in `text` (what PostgreSQL's char_length counts), or
/// nullopt when it is not valid UTF-8.
std::optional<std::size_t> utf8_length(std::string_view text) noexcept;

/// True when `text` has an ASCII control character (including newlines and DEL).
bool has_control_characters(std::string_view text) noexcept;

/// True when `text` is empty or only ASCII whitespace.
bool is_blank(std::string_view text) noexcept;

}  // namespace outbox::operations
