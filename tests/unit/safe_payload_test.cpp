#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <string>

#include "outbox/sdk/payload.hpp"
#include "support/free_text_cases.hpp"

namespace {

using outbox::sdk::FieldKind;
using outbox::sdk::kMaxPayloadBytes;
using outbox::sdk::PayloadError;
using outbox::sdk::PayloadSchema;
using outbox::sdk::SafePayload;

const PayloadSchema kSchema{
    {"website_id", FieldKind::Uuid},
    {"mission_id", FieldKind::Identifier},
    {"domain", FieldKind::String},
    {"score", FieldKind::Integer, 256, false},
    {"ratio", FieldKind::Number, 256, false},
    {"first_time", FieldKind::Boolean, 256, false},
    {"note", FieldKind::String, 16, false},
};

constexpr const char* kUuid = "123e4567-e89b-12d3-a456-426614174000";

SafePayload valid() {
    SafePayload p(kSchema);
    p.set("website_id", kUuid).set("mission_id", "mission-42").set("domain", "example.com");
    return p;
}

// Runs `action`, expects a PayloadError for `field`, and checks the message never echoes `value`.
void expect_rejected(const std::function<void()>& action, const std::string& field, const std::string& value) {
    try {
        action();
        ADD_FAILURE() << "accepted " << field;
    } catch (const PayloadError& e) {
        EXPECT_EQ(e.field(), field);
        if (!value.empty()) {
            EXPECT_EQ(std::string(e.what()).find(value), std::string::npos)
                << "the rejected value must not appear in the message: " << e.what();
        }
    }
}

void expect_string_rejected(const std::string& field, const std::string& value) {
    SCOPED_TRACE(field + " <- " + value);
    expect_rejected([&] { SafePayload(kSchema).set(field, value); }, field, value);
}

TEST(SafePayload, AcceptsValidValuesOfEveryKind) {
    auto p = valid();
    p.set("score", 7).set("ratio", 0.25).set("first_time", true).set("note", "SUMMER_SOLSTICE");
    const auto json = nlohmann::json::parse(p.json());
    EXPECT_EQ(json["website_id"], kUuid);
    EXPECT_EQ(json["mission_id"], "mission-42");
    EXPECT_EQ(json["domain"], "example.com");
    EXPECT_EQ(json["score"], 7);
    EXPECT_EQ(json["ratio"], 0.25);
    EXPECT_EQ(json["first_time"], true);
    EXPECT_EQ(json["note"], "SUMMER_SOLSTICE");
}

TEST(SafePayload, AcceptsUppercaseUuidsAndIdentifierPunctuation) {
    SafePayload p(kSchema);
    p.set("website_id", "123E4567-E89B-12D3-A456-426614174000")
        .set("mission_id", "ns:mission_42.v2-a")
        .set("domain", "a b c");
    EXPECT_NO_THROW((void)p.json());
}

TEST(SafePayload, AcceptsIdentifiersWithUpToTwelveDigitsAndDates) {
    for (const char* id : {"123456789012", "order-123456789", "2024-06-21", "20240621"}) {
        EXPECT_NO_THROW(SafePayload(kSchema).set("mission_id", id)) << id;
    }
}

TEST(SafePayload, AcceptsIntegerExtremesAndUnsignedThatFit) {
    auto p = valid();
    EXPECT_NO_THROW(p.set("score", std::numeric_limits<std::int64_t>::min()));
    EXPECT_NO_THROW(p.set("score", std::uint64_t{INT64_MAX}));
    EXPECT_THROW(p.set("score", std::uint64_t{INT64_MAX} + 1), PayloadError);
}

TEST(SafePayload, AnIntegerFieldTakesALongIdWhoseDigitsAStringFieldRefuses) {
    const std::int64_t java_long_id = 9007199254740993;  // 2^53 + 1: 16 digits
    auto p = valid();
    EXPECT_NO_THROW(p.set("score", java_long_id)) << "numeric ids are what Integer is for";
    EXPECT_NE(p.json().find("9007199254740993"), std::string::npos) << "kept exactly";
    EXPECT_THROW(SafePayload(kSchema).set("domain", std::to_string(java_long_id)), PayloadError)
        << "as text the same digits are a long digit run";
}

TEST(SafePayload, RejectsAnUndeclaredField) {
    expect_rejected([] { SafePayload(kSchema).set("email", "person-value"); }, "email", "person-value");
}

TEST(SafePayload, RejectsTheWrongKind) {
    expect_rejected([] { SafePayload(kSchema).set("score", "12"); }, "score", "12");
    expect_rejected([] { SafePayload(kSchema).set("domain", 12); }, "domain", "12");
    expect_rejected([] { SafePayload(kSchema).set("ratio", true); }, "ratio", "true");
    expect_rejected([] { SafePayload(kSchema).set("first_time", 1.5); }, "first_time", "1.5");
    expect_rejected([] { SafePayload(kSchema).set("website_id", 5); }, "website_id", "5");
}

TEST(SafePayload, RejectsNonFiniteNumbers) {
    expect_rejected([] { SafePayload(kSchema).set("ratio", std::numeric_limits<double>::quiet_NaN()); }, "ratio",
                    "nan");
    expect_rejected([] { SafePayload(kSchema).set("ratio", std::numeric_limits<double>::infinity()); }, "ratio", "inf");
}

TEST(SafePayload, RejectsMalformedUuids) {
    for (const char* value : {"", "123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400g",
                              "{123e4567-e89b-12d3-a456-426614174000}"}) {
        expect_string_rejected("website_id", value);
    }
}

TEST(SafePayload, RejectsOversizeStrings) {
    expect_string_rejected("note", std::string(17, 'a'));
    expect_string_rejected("domain", std::string(257, 'a'));
    expect_string_rejected("mission_id", std::string(257, 'a'));
    EXPECT_NO_THROW(SafePayload(kSchema).set("note", std::string(16, 'a'))) << "exactly max_length is allowed";
}

TEST(SafePayload, RejectsEmptyStrings) {
    expect_string_rejected("domain", "");
    expect_string_rejected("mission_id", "");
}

TEST(SafePayload, RejectsIdentifierCharactersOutsideTheAllowList) {
    for (const char* value : {"mission 42", "mission/42", "a@b", "caf\xc3\xa9"})
        expect_string_rejected("mission_id", value);
}

TEST(SafePayload, RejectsEmailAddresses) {
    expect_string_rejected("domain", "alice@example.com");
    expect_string_rejected("domain", "contact alice.kim@mail.example.co.kr now");
}

TEST(SafePayload, RejectsPhoneNumbers) {
    for (const char* value : {"010-1234-5678", "+82 10 1234 5678", "(02) 123-4567 ext", "01012345678"}) {
        expect_string_rejected("domain", value);
    }
}

TEST(SafePayload, RejectsPhoneNumbersWrittenAsIdentifiers) {
    for (const char* value : {"010-1234-5678", "010.1234.5678"}) expect_string_rejected("mission_id", value);
}

TEST(SafePayload, RejectsJwts) {
    const std::string jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig";
    expect_string_rejected("domain", jwt);
    expect_string_rejected("domain", "Bearer " + jwt);
    expect_string_rejected("mission_id", jwt);
    // Whatever follows it: the end of a sentence, a quote, a bracket.
    expect_string_rejected("domain", "Rotated token " + jwt + ".");
    expect_string_rejected("domain", "\"" + jwt + "\"");
    expect_string_rejected("domain", "(" + jwt + ")");
    expect_string_rejected("mission_id", jwt + ".");
}

TEST(SafePayload, RejectsLookAlikeDigitsAndAtSigns) {
    expect_string_rejected("domain", "ann\xef\xbc\xa0" "example.com");  // fullwidth @
    // ０１０-１２３４-５６７８
    expect_string_rejected("domain", "\xef\xbc\x90\xef\xbc\x91\xef\xbc\x90-\xef\xbc\x91\xef\xbc\x92\xef\xbc\x93"
                                     "\xef\xbc\x94-\xef\xbc\x95\xef\xbc\x96\xef\xbc\x97\xef\xbc\x98");
    // nine Devanagari digits
    expect_string_rejected("domain", "\xe0\xa5\xa6\xe0\xa5\xa7\xe0\xa5\xa8\xe0\xa5\xa9\xe0\xa5\xaa\xe0\xa5\xab"
                                     "\xe0\xa5\xac\xe0\xa5\xad\xe0\xa5\xae");
}

TEST(SafePayload, RejectsThirteenDigitRunsInIdentifiers) {
    expect_string_rejected("mission_id", "1234567890123");
    expect_string_rejected("mission_id", "card-4111111111111111");
}

TEST(SafePayload, RejectsAMissingRequiredField) {
    SafePayload p(kSchema);
    p.set("website_id", kUuid).set("domain", "example.com");
    expect_rejected([&] { (void)p.json(); }, "mission_id", kUuid);
}

TEST(SafePayload, OptionalFieldsMayBeLeftOut) {
    const auto json = nlohmann::json::parse(valid().json());
    EXPECT_FALSE(json.contains("score"));
}

TEST(SafePayload, RejectsAPayloadLargerThanTheLimit) {
    const PayloadSchema schema{{"blob", FieldKind::String, 2 * kMaxPayloadBytes}};
    const std::string big(kMaxPayloadBytes, 'a');  // with the quotes and key the JSON text exceeds the limit
    SafePayload p(schema);
    p.set("blob", big);
    expect_rejected([&] { (void)p.json(); }, "*", big);

    // The limit is on the text PostgreSQL stores, `{"blob": "..."}`, one byte more than the compact JSON.
    SafePayload fits(schema);
    fits.set("blob", std::string(kMaxPayloadBytes - std::string(R"({"blob": ""})").size(), 'a'));
    EXPECT_EQ(fits.json().size(), kMaxPayloadBytes - 1) << "exactly the limit is allowed";
    SafePayload over(schema);
    over.set("blob", std::string(kMaxPayloadBytes - std::string(R"({"blob":""})").size(), 'a'));
    expect_rejected([&] { (void)over.json(); }, "*", "");
}

}  // namespace

namespace {

// The aggregate_key rules on their own; tests/integration/free_text_test.cpp holds the C++
// publish() and SQL outbox_publish() to the same list.
TEST(FreeTextRule, FollowsTheSharedCaseList) {
    for (const auto& c : outbox::test::kFreeTextCases) {
        const char* rule = outbox::sdk::detail::free_text_rule(c.value);
        EXPECT_STREQ(rule, c.rule) << c.value;
    }
}

}  // namespace
