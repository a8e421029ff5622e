// The circuit breaker's sliding window (core::CircuitWindow): pure, the clock a parameter.
#include <gtest/gtest.h>

#include "core/circuit_window.hpp"

namespace {

using namespace std::chrono_literals;
using outbox::core::CircuitWindow;
using Clock = std::chrono::steady_clock;

const Clock::time_point kStart = Clock::time_point{} + 1000h;

TEST(CircuitWindow, TripsAtTheRatioOnceMinCallsEndedInTheWindow) {
    CircuitWindow window(30s, 20, 0.5);
    // 19 calls, all failed: too few to judge.
    for (int i = 0; i < 19; ++i) EXPECT_FALSE(window.record(kStart + i * 100ms, true)) << i;
    const auto tripped = window.record(kStart + 1900ms, false);
    ASSERT_TRUE(tripped) << "19 of 20 failed";
    EXPECT_EQ(*tripped, (CircuitWindow::Tally{20, 19}));
    EXPECT_EQ(window.tally(kStart + 2s), (CircuitWindow::Tally{0, 0})) << "a trip starts the window again";
}

TEST(CircuitWindow, ExactlyTheRatioTripsAndJustBelowDoesNot) {
    CircuitWindow below(30s, 20, 0.5);
    for (int i = 0; i < 9; ++i) below.record(kStart, true);
    for (int i = 0; i < 10; ++i) below.record(kStart, false);
    EXPECT_FALSE(below.record(kStart, false)) << "9 of 20 is below 0.5";
    EXPECT_EQ(below.tally(kStart), (CircuitWindow::Tally{20, 9}));

    CircuitWindow at(30s, 20, 0.5);
    for (int i = 0; i < 9; ++i) at.record(kStart, true);
    for (int i = 0; i < 10; ++i) at.record(kStart, false);
    EXPECT_TRUE(at.record(kStart, true)) << "10 of 20 is 0.5";

    CircuitWindow binary(30s, 100, 0.55);
    for (int i = 0; i < 45; ++i) binary.record(kStart, false);
    for (int i = 0; i < 54; ++i) binary.record(kStart, true);
    EXPECT_TRUE(binary.record(kStart, true)) << "55 of 100 is 0.55 (0.55 * 100 is a little more than 55 in binary)";
}

TEST(CircuitWindow, CallsOlderThanTheWindowNoLongerCount) {
    CircuitWindow window(10s, 4, 0.5);
    window.record(kStart, true);
    window.record(kStart, true);
    window.record(kStart, true);
    EXPECT_EQ(window.tally(kStart + 9s), (CircuitWindow::Tally{3, 3}));
    // Counted in twentieths: a call leaves the window between 19/20 and all of it later.
    EXPECT_EQ(window.tally(kStart + 10s + 1ms), (CircuitWindow::Tally{0, 0}));
    EXPECT_FALSE(window.record(kStart + 11s, true)) << "the three old failures are gone: 1 call";
    EXPECT_EQ(window.tally(kStart + 11s), (CircuitWindow::Tally{1, 1}));
}

TEST(CircuitWindow, SuccessesKeepItClosedAtAnyVolume) {
    CircuitWindow window(1s, 1, 0.5);
    for (int i = 0; i < 100000; ++i) EXPECT_FALSE(window.record(kStart + i * 1ms, false));
    EXPECT_GT(window.tally(kStart + 100s).calls, 900);
    EXPECT_LE(window.tally(kStart + 100s).calls, 1000);
}

TEST(CircuitWindow, ARatioOfOneTripsOnlyWhenEveryCallFailed) {
    CircuitWindow window(30s, 3, 1.0);
    window.record(kStart, true);
    window.record(kStart, false);
    EXPECT_FALSE(window.record(kStart, true));
    EXPECT_FALSE(window.record(kStart, true)) << "3 of 4";
    window.clear();
    window.record(kStart, true);
    window.record(kStart, true);
    EXPECT_TRUE(window.record(kStart, true));
}

TEST(CircuitWindow, ATinyWindowStillWorks) {
    CircuitWindow window(1ms, 2, 0.5);
    window.record(kStart, true);
    EXPECT_TRUE(window.record(kStart, true));
    window.record(kStart, true);
    EXPECT_FALSE(window.record(kStart + 2ms, true)) << "the first failure left the window";
}

}  // namespace
