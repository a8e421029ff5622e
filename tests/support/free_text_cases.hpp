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
    FreeTextCase{"eyJa.b.c.", nullptr},
    FreeTextCase{"12-345", nullptr},
    FreeTextCase{"acct 123456789012", nullptr},
    FreeTextCase{"ann@example.com", kEmail},
    FreeTextCase{"order of ann@example.com today", kEmail},
    FreeTextCase{"a\tb@x.y", kEmail},
    FreeTextCase{"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln", kJwt},
    FreeTextCase{"token eyJa.b.c end", kJwt},
    FreeTextCase{"010-1234-5678", kPhone},
    FreeTextCase{"+82 (10) 1234 5678", kPhone},
    FreeTextCase{"card-4111111111111111", kDigitRun},
    FreeTextCase{"acct 1234567890123", kDigitRun},
    FreeTextCase{"1234567890123a", kDigitRun},
};

}  // namespace outbox::test
