#pragma once

#include <array>
#include <optional>
#include <string_view>

namespace outbox::core {

// Who moves rows into and out of each state:
enum class EventStatus {
    Pending,         // outbox_publish() and operator retry put rows here; the scheduler claims them.
    Processing,      // the scheduler's claim; left by the lease store (fenced) or the rescuer (expired lease).
    RetryWait,       // a retryable failure or a rescued lease; the scheduler claims it once due.
    Completed,       // every supporting handler consumed the event; only retention deletes it.
    ReviewRequired,  // non-retryable failure or attempts used up; only an operator (retry or discard) moves it.
    Discarded,       // an operator gave up on a REVIEW_REQUIRED event; never run again; only retention deletes it.
};

/// Every status's text, in the enum's order.
inline constexpr std::array<std::string_view, 6> kStatusTexts{"PENDING",   "PROCESSING",      "RETRY_WAIT",
                                                              "COMPLETED", "REVIEW_REQUIRED", "DISCARDED"};

/// COMPLETED and DISCARDED: no handler runs the event again and nothing moves it out. Every
/// other status holds back the later events of the same aggregate.
bool is_terminal(EventStatus status) noexcept;

/// The single mapping between the enum and the text stored in event_publication.status.
std::string_view to_text(EventStatus status) noexcept;
std::optional<EventStatus> status_from_text(std::string_view text) noexcept;

}  // namespace outbox::core
