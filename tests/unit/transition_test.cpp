#include "core/transition.hpp"

#include <gtest/gtest.h>

namespace {

using namespace std::chrono_literals;
using outbox::core::Clock;
using outbox::core::decide_transition;
using outbox::core::EventStatus;
using outbox::core::HandlerOutcome;
using outbox::core::RetryPolicy;
using outbox::core::sanitize_error_code;
using Kind = HandlerOutcome::Kind;

const RetryPolicy kPolicy(1s, 5min);
const Clock::time_point kNow = Clock::time_point{} + 1000h;
constexpr int kMaxAttempts = 8;

HandlerOutcome succeeded() { return {Kind::Succeeded, {}, std::nullopt}; }
HandlerOutcome retry(std::string code, std::optional<std::chrono::milliseconds> after = std::nullopt) {
    return {Kind::Retry, std::move(code), after};
}
HandlerOutcome review(std::string code) { return {Kind::Review, std::move(code), std::nullopt}; }
HandlerOutcome lease_lost() { return {Kind::LeaseLost, {}, std::nullopt}; }

TEST(Transition, AllHandlersSucceededCompletes) {
    const auto t = decide_transition({succeeded(), succeeded()}, 1, kMaxAttempts, kPolicy, kNow, 0.5);
    ASSERT_TRUE(t.has_value());
    EXPECT_EQ(t->status, EventStatus::Completed);
    EXPECT_FALSE(t->next_attempt_at.has_value());
    EXPECT_EQ(t->error_code, "");
}

TEST(Transition, NoOutcomesLeftToRunCompletes) {
    const auto t = decide_transition({}, 2, kMaxAttempts, kPolicy, kNow, 0.5);
    ASSERT_TRUE(t.has_value());
    EXPECT_EQ(t->status, EventStatus::Completed) << "every handler had already consumed the event";
}

TEST(Transition, SuccessOnTheLastAllowedAttemptStillCompletes) {
    const auto t = decide_transition({succeeded()}, kMaxAttempts, kMaxAttempts, kPolicy, kNow, 0.5);
    ASSERT_TRUE(t.has_value());
    EXPECT_EQ(t->status, EventStatus::Completed);
}

TEST(Transition, RetryableFailureBelowMaxAttemptsWaitsForTheBackoff) {
    for (const double r : {0.0, 0.5, 0.999}) {
        for (int attempt = 1; attempt < kMaxAttempts; ++attempt) {
            const auto t = decide_transition({retry("HTTP_503")}, attempt, kMaxAttempts, kPolicy, kNow, r);
            ASSERT_TRUE(t.has_value());
            EXPECT_EQ(t->status, EventStatus::RetryWait);
            EXPECT_EQ(t->error_code, "HTTP_503");
            ASSERT_TRUE(t->next_attempt_at.has_value());
            const auto ceiling = kPolicy.ceiling(attempt);
            EXPECT_GE(*t->next_attempt_at, kNow + ceiling / 2) << "attempt " << attempt << " r " << r;
            EXPECT_LE(*t->next_attempt_at, kNow + ceiling) << "attempt " << attempt << " r " << r;
        }
    }
}

TEST(Transition, LaterAttemptsWaitLonger) {
    const auto first = decide_transition({retry("TIMEOUT")}, 1, kMaxAttempts, kPolicy, kNow, 0.0);
    const auto fourth = decide_transition({retry("TIMEOUT")}, 4, kMaxAttempts, kPolicy, kNow, 0.0);
    EXPECT_EQ(*first->next_attempt_at, kNow + 500ms);
    EXPECT_EQ(*fourth->next_attempt_at, kNow + 4s);
}

TEST(Transition, RetryAfterLongerThanTheBackoffIsHonoured) {
    const auto t = decide_transition({retry("HTTP_429", 2min)}, 1, kMaxAttempts, kPolicy, kNow, 0.5);
    ASSERT_TRUE(t.has_value());
    EXPECT_EQ(t->status, EventStatus::RetryWait);
    EXPECT_EQ(t->next_attempt_at, kNow + 2min);
}

TEST(Transition, RetryAfterShorterThanTheBackoffDoesNotShortenIt) {
    const auto t = decide_transition({retry("HTTP_429", 1ms)}, 5, kMaxAttempts, kPolicy, kNow, 0.0);
    ASSERT_TRUE(t.has_value());
    EXPECT_EQ(t->next_attempt_at, kNow + kPolicy.ceiling(5) / 2);
}

TEST(Transition, RetryableFailureAtMaxAttemptsGoesToReview) {
    const auto t = decide_transition({retry("HTTP_503", 1s)}, kMaxAttempts, kMaxAttempts, kPolicy, kNow, 0.5);
    ASSERT_TRUE(t.has_value());
    EXPECT_EQ(t->status, EventStatus::ReviewRequired);
    EXPECT_EQ(t->error_code, "HTTP_503") << "the last failure's code is kept for the operator";
    EXPECT_FALSE(t->next_attempt_at.has_value());
}

TEST(Transition, RetryableFailureBeyondMaxAttemptsGoesToReview) {
    const auto t = decide_transition({retry("TIMEOUT")}, kMaxAttempts + 3, kMaxAttempts, kPolicy, kNow, 0.5);
    ASSERT_TRUE(t.has_value());
    EXPECT_EQ(t->status, EventStatus::ReviewRequired) << "max_attempts lowered while the event was in flight";
}

TEST(Transition, NonRetryableFailureGoesToReviewAfterOneAttempt) {
    const auto t = decide_transition({review("HTTP_400")}, 1, kMaxAttempts, kPolicy, kNow, 0.5);
    ASSERT_TRUE(t.has_value());
    EXPECT_EQ(t->status, EventStatus::ReviewRequired);
    EXPECT_EQ(t->error_code, "HTTP_400");
    EXPECT_FALSE(t->next_attempt_at.has_value());
}

TEST(Transition, OneRetryableFailureAmongSuccessesRetriesTheEvent) {
    const auto t =
        decide_transition({succeeded(), retry("CONNECT_FAILED"), succeeded()}, 2, kMaxAttempts, kPolicy, kNow, 0.5);
    ASSERT_TRUE(t.has_value());
    EXPECT_EQ(t->status, EventStatus::RetryWait);
    EXPECT_EQ(t->error_code, "CONNECT_FAILED");
}

TEST(Transition, NonRetryableFailureWinsOverRetryableOnes) {
    const auto t = decide_transition({retry("HTTP_503", 1h), review("HTTP_422"), succeeded()}, 1, kMaxAttempts, kPolicy,
                                     kNow, 0.5);
    ASSERT_TRUE(t.has_value());
    EXPECT_EQ(t->status, EventStatus::ReviewRequired);
    EXPECT_EQ(t->error_code, "HTTP_422");
}

TEST(Transition, LargestRetryAfterAmongFailuresIsUsed) {
    const auto t = decide_transition({retry("HTTP_429", 30s), retry("HTTP_503", 90s), retry("TIMEOUT")}, 1,
                                     kMaxAttempts, kPolicy, kNow, 0.5);
    ASSERT_TRUE(t.has_value());
    EXPECT_EQ(t->next_attempt_at, kNow + 90s);
    EXPECT_EQ(t->error_code, "HTTP_429") << "the first failure's code is reported";
}

TEST(Transition, LostLeaseMeansTheHostMustNotTouchTheRow) {
    EXPECT_FALSE(decide_transition({lease_lost()}, 1, kMaxAttempts, kPolicy, kNow, 0.5).has_value());
    EXPECT_FALSE(decide_transition({succeeded(), lease_lost()}, 1, kMaxAttempts, kPolicy, kNow, 0.5).has_value());
    EXPECT_FALSE(decide_transition({review("HTTP_400"), lease_lost(), retry("X")}, 8, kMaxAttempts, kPolicy, kNow, 0.5)
                     .has_value());
}

TEST(Transition, SafeErrorCodesPassThrough) {
    for (const char* code : {"HTTP_503", "TIMEOUT", "CONNECT_FAILED", "WORKER_LOST", "A", "X1_2"}) {
        EXPECT_EQ(sanitize_error_code(code), code);
    }
    EXPECT_EQ(sanitize_error_code(std::string(64, 'A')), std::string(64, 'A'));
}

TEST(Transition, UnsafeErrorCodesAreReplaced) {
    for (const std::string& code : {std::string(), std::string("http_503"), std::string("1HTTP"), std::string("_X"),
                                    std::string("HTTP 503"), std::string("user=alice@example.com"),
                                    std::string("HTTP-503"), std::string(65, 'A'), std::string("CODE\n")}) {
        EXPECT_EQ(sanitize_error_code(code), "INVALID_ERROR_CODE") << '"' << code << '"';
    }
}

}  // namespace

namespace {

using outbox::core::OperatorAction;
using outbox::core::operator_transition;

TEST(OperatorTransition, RetryOfAReviewedEventMakesItPendingAgain) {
    EXPECT_EQ(operator_transition(EventStatus::ReviewRequired, OperatorAction::Retry), EventStatus::Pending);
}

TEST(OperatorTransition, DiscardOfAReviewedEventMakesItDiscarded) {
    EXPECT_EQ(operator_transition(EventStatus::ReviewRequired, OperatorAction::Discard), EventStatus::Discarded);
}

TEST(OperatorTransition, OnlyReviewedEventsCanBeRetried) {
    for (const auto status : {EventStatus::Pending, EventStatus::Processing, EventStatus::RetryWait,
                              EventStatus::Completed, EventStatus::Discarded}) {
        EXPECT_FALSE(operator_transition(status, OperatorAction::Retry).has_value())
            << outbox::core::to_text(status) << " must not be retried";
    }
}

TEST(OperatorTransition, AWaitingEventCanBeDiscardedButNeverARunningOrFinishedOne) {
    for (const auto status : {EventStatus::Pending, EventStatus::RetryWait}) {
        EXPECT_EQ(operator_transition(status, OperatorAction::Discard), EventStatus::Discarded)
            << outbox::core::to_text(status) << " can block its aggregate's successors, so it can be discarded";
    }
    for (const auto status : {EventStatus::Processing, EventStatus::Completed, EventStatus::Discarded}) {
        EXPECT_FALSE(operator_transition(status, OperatorAction::Discard).has_value())
            << outbox::core::to_text(status) << " must not be discarded";
    }
}

TEST(OperatorTransition, CancelDiscardsOnlyAWaitingEvent) {
    EXPECT_EQ(operator_transition(EventStatus::Pending, OperatorAction::Cancel), EventStatus::Discarded);
    EXPECT_EQ(operator_transition(EventStatus::RetryWait, OperatorAction::Cancel), EventStatus::Discarded);
    for (const auto status : {EventStatus::Processing, EventStatus::ReviewRequired, EventStatus::Completed,
                              EventStatus::Discarded}) {
        EXPECT_FALSE(operator_transition(status, OperatorAction::Cancel).has_value())
            << outbox::core::to_text(status) << " must not be cancelled";
    }
}

}  // namespace
