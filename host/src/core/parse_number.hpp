#pragma once

#include <charconv>
#include <optional>
#include <string_view>
#include <system_error>

namespace outbox::core {

/// `text` as a number of type T when it is exactly one (no sign for unsigned types, no
/// spaces, no trailing characters, in range); nullopt otherwise.
template <class T>
std::optional<T> parse_number(std::string_view text) {
    T value{};
    const char* end = text.data() + text.size();
    const auto [ptr, error] = std::from_chars(text.data(), end, value);
    if (text.empty() || error != std::errc{} || ptr != end) return std::nullopt;
    return value;
}

}  // namespace outbox::core
