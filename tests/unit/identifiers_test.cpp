#include <gtest/gtest.h>

#include <string>

#include "core/identifiers.hpp"

namespace outbox::core {
namespace {

TEST(Identifiers, UuidTakesEitherCaseAndLowerUuidOnlyLowerCase) {
    EXPECT_TRUE(is_uuid("0f8fad5b-d9cb-469f-a165-70867728950e"));
    EXPECT_TRUE(is_uuid("0F8FAD5B-D9CB-469F-A165-70867728950E"));
    EXPECT_TRUE(is_lower_uuid("0f8fad5b-d9cb-469f-a165-70867728950e"));
    EXPECT_FALSE(is_lower_uuid("0F8FAD5B-D9CB-469F-A165-70867728950E"));
    EXPECT_FALSE(is_uuid("0f8fad5b-d9cb-469f-a165-70867728950"));
    EXPECT_FALSE(is_uuid("0f8fad5bd-9cb-469f-a165-70867728950e"));
    EXPECT_FALSE(is_uuid("0f8fad5b-d9cb-469f-a165-70867728950g"));
    EXPECT_FALSE(is_uuid(""));
}

TEST(Identifiers, EventTypeIsPascalCaseLettersAndDigitsUpTo100) {
    EXPECT_TRUE(is_event_type("MissionCompleted"));
    EXPECT_TRUE(is_event_type("A"));
    EXPECT_TRUE(is_event_type("V2Event"));
    EXPECT_TRUE(is_event_type("A" + std::string(99, 'b')));
    EXPECT_FALSE(is_event_type("A" + std::string(100, 'b')));
    EXPECT_FALSE(is_event_type("missionCompleted"));
    EXPECT_FALSE(is_event_type("Mission_Completed"));
    EXPECT_FALSE(is_event_type(""));
}

TEST(Identifiers, ErrorCodeIsUpperCaseLettersDigitsAndUnderscoresUpTo64) {
    EXPECT_TRUE(is_error_code("HTTP_503"));
    EXPECT_TRUE(is_error_code(std::string(64, 'A')));
    EXPECT_FALSE(is_error_code(std::string(65, 'A')));
    EXPECT_FALSE(is_error_code("_LEADING"));
    EXPECT_FALSE(is_error_code("http_503"));
    EXPECT_FALSE(is_error_code(""));
}

TEST(Identifiers, HandlerNameIsTheSdkRule) {
    static_assert(is_handler_name("category-classification"));
    EXPECT_TRUE(is_handler_name("a.b_c-1"));
    EXPECT_TRUE(is_handler_name(std::string(100, 'a')));
    EXPECT_FALSE(is_handler_name(std::string(101, 'a')));
    EXPECT_FALSE(is_handler_name("-leading"));
    EXPECT_FALSE(is_handler_name("Upper"));
    EXPECT_FALSE(is_handler_name(""));
}

}  // namespace
}  // namespace outbox::core
