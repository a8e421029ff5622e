#include "core/event_status.hpp"

#include <gtest/gtest.h>

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
