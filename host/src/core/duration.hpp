#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace outbox::core {

/// Parses "250ms", "1s", "5m", "2h", "7d" (a positive integer and one unit; "0s" allowed).
/// Returns nullopt for anything else, including overflow.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) noexcept;

/// The shortest exact spelling in the same units, e.g. 300000ms -> "5m".
std::string format_duration(std::chrono::milliseconds value);

}  // namespace outbox::core
