#include "core/duration.hpp"

#include <gtest/gtest.h>

namespace {

using namespace std::chrono_literals;
using outbox::core::format_duration;
using outbox::core::parse_duration;

TEST(Duration, ParsesEveryUnit) {
    EXPECT_EQ(parse_duration("250ms"), 250ms);
    EXPECT_EQ(parse_duration("1s"), 1s);
    EXPECT_EQ(parse_duration("5m"), 5min);
    EXPECT_EQ(parse_duration("2h"), 2h);
    EXPECT_EQ(parse_duration("7d"), 24h * 7);
}

TEST(Duration, ZeroIsAllowed) {
    EXPECT_EQ(parse_duration("0s"), 0ms);
    EXPECT_EQ(parse_duration("0ms"), 0ms);
    EXPECT_EQ(parse_duration("0"), 0ms) << "zero needs no unit (database.startup_timeout: 0 fails at once)";
    EXPECT_FALSE(parse_duration("00x").has_value());
}

TEST(Duration, RejectsAnythingButOneNonNegativeIntegerAndOneUnit) {
    for (const char* text : {"", "1", "s", "ms", "-1s", "+1s", "1.5s", " 1s", "1s ", "1 s", "1sec", "1S", "1Ms", "1s2",
                             "1m30s", "abc", "1w", "0x10s"}) {
        EXPECT_FALSE(parse_duration(text).has_value()) << '"' << text << '"';
    }
}

TEST(Duration, RejectsOverflowInsteadOfWrapping) {
    EXPECT_FALSE(parse_duration("999999999999d").has_value()) << "12 digits of days overflow 64-bit milliseconds";
    EXPECT_FALSE(parse_duration("9999999999999ms").has_value()) << "more than 12 digits";
    EXPECT_EQ(parse_duration("999999999999ms"), std::chrono::milliseconds{999999999999});
}

TEST(Duration, FormatsInTheLargestExactUnit) {
    EXPECT_EQ(format_duration(300000ms), "5m");
    EXPECT_EQ(format_duration(1500ms), "1500ms");
    EXPECT_EQ(format_duration(90s), "90s");
    EXPECT_EQ(format_duration(24h * 7), "7d");
    EXPECT_EQ(format_duration(2h), "2h");
    EXPECT_EQ(format_duration(0ms), "0ms");
}

TEST(Duration, FormattedTextParsesBackToTheSameValue) {
    for (const std::chrono::milliseconds value : {1ms, 999ms, 1000ms, 61000ms, 3600000ms, 86400000ms, 90000000ms}) {
        EXPECT_EQ(parse_duration(format_duration(value)), value) << format_duration(value);
    }
}

}  // namespace
