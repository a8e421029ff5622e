#include "core/retry_policy.hpp"

#include <gtest/gtest.h>

namespace {

using namespace std::chrono_literals;
using outbox::core::RetryPolicy;

TEST(RetryPolicy, CeilingDoublesFromInitialBackoff) {
    const RetryPolicy policy(1s, 5min);
    EXPECT_EQ(policy.ceiling(1), 1s);
    EXPECT_EQ(policy.ceiling(2), 2s);
    EXPECT_EQ(policy.ceiling(3), 4s);
    EXPECT_EQ(policy.ceiling(4), 8s);
    EXPECT_EQ(policy.ceiling(9), 256s);
}

TEST(RetryPolicy, CeilingIsCappedAtMaxBackoff) {
    const RetryPolicy policy(1s, 5min);
    EXPECT_EQ(policy.ceiling(10), 5min) << "512s is capped at 300s";
    EXPECT_EQ(policy.ceiling(1000), 5min) << "a large attempt number must not overflow";
}

TEST(RetryPolicy, EveryAttemptsDelayLiesBetweenHalfTheCeilingAndTheCeiling) {
    const RetryPolicy policy(1s, 5min);
    for (int attempt = 1; attempt <= 20; ++attempt) {
        const auto top = policy.ceiling(attempt);
        for (const double r : {0.0, 0.1, 0.5, 0.9, 0.999999}) {
            const auto d = policy.delay(attempt, r);
            EXPECT_GE(d, top / 2) << "attempt " << attempt << " r " << r;
            EXPECT_LE(d, top) << "attempt " << attempt << " r " << r;
        }
    }
}

TEST(RetryPolicy, JitterSpansTheUpperHalfOfTheCeiling) {
    const RetryPolicy policy(1s, 5min);
    EXPECT_EQ(policy.delay(3, 0.0), 2s) << "lowest draw: half of the 4s ceiling";
    EXPECT_EQ(policy.delay(3, 0.5), 3s);
    EXPECT_EQ(policy.delay(3, 1.0), 4s) << "highest draw: the ceiling itself";
    EXPECT_EQ(policy.delay(10, 0.0), 150s);
    EXPECT_EQ(policy.delay(10, 1.0), 5min);
}

TEST(RetryPolicy, DrawsOutsideTheUnitIntervalAreClamped) {
    const RetryPolicy policy(1s, 5min);
    EXPECT_EQ(policy.delay(2, -3.0), 1s);
    EXPECT_EQ(policy.delay(2, 7.0), 2s);
}

TEST(RetryPolicy, ZeroInitialBackoffRetriesImmediately) {
    const RetryPolicy policy(0ms, 5min);
    EXPECT_EQ(policy.ceiling(1), 0ms);
    EXPECT_EQ(policy.ceiling(50), 0ms);
    EXPECT_EQ(policy.delay(50, 0.9), 0ms);
}

TEST(RetryPolicy, MaxBackoffBelowInitialIsRaisedToInitial) {
    const RetryPolicy policy(10s, 1s);
    EXPECT_EQ(policy.ceiling(1), 10s);
    EXPECT_EQ(policy.ceiling(5), 10s);
}

TEST(RetryPolicy, LargestConfigurableBackoffDoesNotOverflow) {
    const RetryPolicy policy(24h, 24h * 7);
    EXPECT_EQ(policy.ceiling(1), 24h);
    EXPECT_EQ(policy.ceiling(4), 24h * 7) << "8d is capped at 7d";
    EXPECT_EQ(policy.ceiling(1000), 24h * 7);
    EXPECT_GE(policy.delay(1000, 0.0), 24h * 7 / 2);
}

}  // namespace
