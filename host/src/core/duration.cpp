#include "core/duration.hpp"

#include <array>
#include <charconv>
#include <cstdint>
#include <utility>

namespace outbox::core {
namespace {
constexpr std::array<std::pair<std::string_view, std::int64_t>, 5> kUnits{{
    {"ms", 1}, {"s", 1000}, {"m", 60'000}, {"h", 3'600'000}, {"d", 86'400'000},
}};
}  // namespace

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) noexcept {
    std::size_t digits = 0;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
    if (digits == 0 || digits > 12) return std::nullopt;
    std::int64_t amount = 0;
    if (std::from_chars(text.data(), text.data() + digits, amount).ec != std::errc{}) return std::nullopt;
    const std::string_view unit = text.substr(digits);
    if (unit.empty() && amount == 0) return std::chrono::milliseconds{0};  // "0" needs no unit
    for (const auto& [name, factor] : kUnits) {
        if (unit == name) {
            if (amount > INT64_MAX / factor) return std::nullopt;
            return std::chrono::milliseconds{amount * factor};
        }
    }
    return std::nullopt;
}

std::string format_duration(std::chrono::milliseconds value) {
    const std::int64_t ms = value.count();
    for (auto it = kUnits.rbegin(); it != kUnits.rend(); ++it) {
        if (ms != 0 && ms % it->second == 0) return std::to_string(ms / it->second) + std::string(it->first);
    }
    return std::to_string(ms) + "ms";
}

}  // namespace outbox::core
