#pragma once
// One list of aggregate_key values and the rule each breaks (nullptr: accepted), shared by
// the tests of the C++ publish() and of SQL outbox_publish(), so both paths are held to the
// same cases.

#include <array>

namespace outbox::test {

struct FreeTextCase {
    const char* value;
    const char* rule;  // nullptr when the value is accepted
};

inline constexpr const char* kEmail = "value is shaped like an e-mail address";
inline constexpr const char* kJwt = "value is shaped like a JWT";
inline constexpr const char* kPhone = "value is shaped like a phone number";
inline constexpr const char* kDigitRun = "value contains a run of 13 or more digits";

inline constexpr std::array kFreeTextCases = {
    FreeTextCase{"user-42", nullptr},
    FreeTextCase{"550e8400-e29b-41d4-a716-446655440000", nullptr},
    FreeTextCase{"312000999999999", nullptr},  // a numeric id (digits only) is not a digit run
    FreeTextCase{"ann@example", nullptr},
    FreeTextCase{"@example.com", nullptr},
    FreeTextCase{"x@y .z", nullptr},
    FreeTextCase{"x@y.\tz", nullptr},
    FreeTextCase{"eyJa.b", nullptr},
    FreeTextCase{"12-345", nullptr},
    FreeTextCase{"acct 123456789012", nullptr},
    FreeTextCase{"eyJa.b.", nullptr},                    // two segments, whatever follows
    FreeTextCase{"(eyJa..b.c)", nullptr},                // an empty segment ends the run
    FreeTextCase{"user-\xef\xbc\x94\xef\xbc\x92", nullptr},  // user-４２
    // ３１２０００９９９９９９９９９: fullwidth digits only are a numeric id, as ASCII ones are
    FreeTextCase{"\xef\xbc\x93\xef\xbc\x91\xef\xbc\x92\xef\xbc\x90\xef\xbc\x90\xef\xbc\x90\xef\xbc\x99"
                 "\xef\xbc\x99\xef\xbc\x99\xef\xbc\x99\xef\xbc\x99\xef\xbc\x99\xef\xbc\x99\xef\xbc\x99\xef\xbc\x99",
                 nullptr},
    FreeTextCase{"ann\xef\xbc\xa0" "example", nullptr},      // ann＠example: no domain dot
    FreeTextCase{"ann@example.com", kEmail},
    FreeTextCase{"order of ann@example.com today", kEmail},
    FreeTextCase{"a\tb@x.y", kEmail},
    FreeTextCase{"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln", kJwt},
    FreeTextCase{"token eyJa.b.c end", kJwt},
    // A JWT is detected whatever follows it: sentence-final, quoted, bracketed.
    FreeTextCase{"eyJa.b.c.", kJwt},
    FreeTextCase{"rotated eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln.", kJwt},
    FreeTextCase{"token \"eyJa.b.c\"", kJwt},
    FreeTextCase{"(eyJa.b.c)", kJwt},
    FreeTextCase{"[eyJa.b.c.d]", kJwt},
    FreeTextCase{"eyJa.b.c..", kJwt},
    FreeTextCase{"ann@example.com.", kEmail},
    FreeTextCase{"(ann@example.com)", kEmail},
    FreeTextCase{"ann\xef\xbc\xa0" "example.com", kEmail},    // ann＠example.com (fullwidth @)
    FreeTextCase{"ann\xef\xb9\xab" "example.com", kEmail},    // ann﹫example.com (small @)
    // ０１０-１２３４-５６７８ (fullwidth digits)
    FreeTextCase{"\xef\xbc\x90\xef\xbc\x91\xef\xbc\x90-\xef\xbc\x91\xef\xbc\x92\xef\xbc\x93\xef\xbc\x94-"
                 "\xef\xbc\x95\xef\xbc\x96\xef\xbc\x97\xef\xbc\x98",
                 kPhone},
    FreeTextCase{"(010-1234-5678)", kPhone},
    FreeTextCase{"010-1234-5678", kPhone},
    FreeTextCase{"+82 (10) 1234 5678", kPhone},
    FreeTextCase{"card-4111111111111111", kDigitRun},
    FreeTextCase{"acct 1234567890123", kDigitRun},
    FreeTextCase{"1234567890123a", kDigitRun},
    // acct ١٢٣٤٥٦٧٨٩٠١٢٣ (Arabic-Indic digits)
    FreeTextCase{"acct \xd9\xa1\xd9\xa2\xd9\xa3\xd9\xa4\xd9\xa5\xd9\xa6\xd9\xa7\xd9\xa8\xd9\xa9\xd9\xa0\xd9\xa1"
                 "\xd9\xa2\xd9\xa3",
                 kDigitRun},
    // card-４１１１１１１１１１１１１１１１ (fullwidth) and 𝟏𝟐𝟑... (mathematical bold digits)
    FreeTextCase{"card-\xef\xbc\x94\xef\xbc\x91\xef\xbc\x91\xef\xbc\x91\xef\xbc\x91\xef\xbc\x91\xef\xbc\x91"
                 "\xef\xbc\x91\xef\xbc\x91\xef\xbc\x91\xef\xbc\x91\xef\xbc\x91\xef\xbc\x91",
                 kDigitRun},
    FreeTextCase{"id \xf0\x9d\x9f\x8f\xf0\x9d\x9f\x90\xf0\x9d\x9f\x91\xf0\x9d\x9f\x92\xf0\x9d\x9f\x93"
                 "\xf0\x9d\x9f\x94\xf0\x9d\x9f\x95\xf0\x9d\x9f\x96\xf0\x9d\x9f\x97\xf0\x9d\x9f\x8e"
                 "\xf0\x9d\x9f\x8f\xf0\x9d\x9f\x90\xf0\x9d\x9f\x91",
                 kDigitRun},
};

}  // namespace outbox::test
