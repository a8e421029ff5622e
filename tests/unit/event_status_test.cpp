#include "core/event_status.hpp"

#include <gtest/gtest.h>

#include <iterator>

namespace {

using outbox::core::EventStatus;
using outbox::core::status_from_text;
using outbox::core::to_text;

TEST(EventStatus, EachStatusHasTheTextStoredInTheDatabase) {
    EXPECT_EQ(to_text(EventStatus::Pending), "PENDING");
    EXPECT_EQ(to_text(EventStatus::Processing), "PROCESSING");
    EXPECT_EQ(to_text(EventStatus::RetryWait), "RETRY_WAIT");
    EXPECT_EQ(to_text(EventStatus::Completed), "COMPLETED");
    EXPECT_EQ(to_text(EventStatus::ReviewRequired), "REVIEW_REQUIRED");
    EXPECT_EQ(to_text(EventStatus::Discarded), "DISCARDED");
}

TEST(EventStatus, TextRoundTripsToTheSameStatus) {
    for (const auto status : {EventStatus::Pending, EventStatus::Processing, EventStatus::RetryWait,
                              EventStatus::Completed, EventStatus::ReviewRequired, EventStatus::Discarded}) {
        EXPECT_EQ(status_from_text(to_text(status)), status) << to_text(status);
    }
}

TEST(EventStatus, TheListOfTextsHoldsEveryStatusOnceInTheEnumsOrder) {
    const EventStatus all[] = {EventStatus::Pending,   EventStatus::Processing,     EventStatus::RetryWait,
                               EventStatus::Completed, EventStatus::ReviewRequired, EventStatus::Discarded};
    ASSERT_EQ(std::size(all), outbox::core::kStatusTexts.size());
    for (std::size_t i = 0; i < std::size(all); ++i) EXPECT_EQ(outbox::core::kStatusTexts[i], to_text(all[i]));
}

TEST(EventStatus, OnlyCompletedAndDiscardedAreTerminal) {
    using outbox::core::is_terminal;
    EXPECT_TRUE(is_terminal(EventStatus::Completed));
    EXPECT_TRUE(is_terminal(EventStatus::Discarded));
    for (const auto status :
         {EventStatus::Pending, EventStatus::Processing, EventStatus::RetryWait, EventStatus::ReviewRequired}) {
        EXPECT_FALSE(is_terminal(status)) << to_text(status) << " must hold back its aggregate's later events";
    }
}

TEST(EventStatus, UnknownOrDifferentlyCasedTextIsNotAStatus) {
    for (const char* text : {"", "pending", "Pending", "DONE", "PENDING ", "REVIEW", "discarded"}) {
        EXPECT_FALSE(status_from_text(text).has_value()) << '"' << text << '"';
    }
}

}  // namespace
