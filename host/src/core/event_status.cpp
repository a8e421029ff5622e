#include "core/event_status.hpp"

#include <array>
#include <utility>

namespace outbox::core {
namespace {
constexpr std::array<std::pair<EventStatus, std::string_view>, 6> kStatusText{{
    {EventStatus::Pending, "PENDING"},
    {EventStatus::Processing, "PROCESSING"},
    {EventStatus::RetryWait, "RETRY_WAIT"},
    {EventStatus::Completed, "COMPLETED"},
    {EventStatus::ReviewRequired, "REVIEW_REQUIRED"},
    {EventStatus::Discarded, "DISCARDED"},
}};
}  // namespace

std::string_view to_text(EventStatus status) noexcept {
    for (const auto& [value, text] : kStatusText) {
        if (value == status) return text;
    }
    return "UNKNOWN";
}

bool is_terminal(EventStatus status) noexcept {
    return status == EventStatus::Completed || status == EventStatus::Discarded;
}

std::optional<EventStatus> status_from_text(std::string_view text) noexcept {
    for (const auto& [value, name] : kStatusText) {
        if (name == text) return value;
    }
    return std::nullopt;
}

}  // namespace outbox::core
