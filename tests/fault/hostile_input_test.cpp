// Hostile publisher input: malformed, oversize and adversarial payloads and arguments through
// outbox_publish() and SafePayload. Each is refused with a clear error and inserts nothing.
// (tests/integration/publish_test.cpp covers nested values, non-objects, an 8 KiB string,
// bad event types and an empty company; tests/unit/safe_payload_test.cpp the allow-list.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include <pqxx/pqxx>

#include "outbox/publisher.hpp"
#include "support/pg_fixture.hpp"

namespace outbox::test {
namespace {

using ::testing::HasSubstr;
using sdk::FieldKind;
using sdk::kMaxPayloadBytes;
using sdk::PayloadError;
using sdk::PayloadSchema;
using sdk::SafePayload;

using Arg = std::optional<std::string>;

struct Refusal {
    std::string sqlstate;
    std::string message;
};

// Calls outbox_publish with raw arguments (NULL for nullopt) and returns how it was refused.
std::optional<Refusal> try_publish(const TestDatabase& db, const Arg& company, const Arg& type, const Arg& payload,
                                   const Arg& aggregate_key = std::nullopt, const Arg& dedup_key = std::nullopt) {
    pqxx::connection conn(db.url());
    pqxx::work tx(conn);
    const auto param = [](const Arg& arg) { return arg ? arg->c_str() : nullptr; };
    try {
        tx.exec_params("SELECT outbox_publish($1, $2, $3::jsonb, $4, $5)", param(company), param(type), param(payload),
                       param(aggregate_key), param(dedup_key));
        tx.commit();
        return std::nullopt;
    } catch (const pqxx::sql_error& e) {
        return Refusal{e.sqlstate(), e.what()};
    }
}

void expect_refused(const TestDatabase& db, const std::optional<Refusal>& refusal, const std::string& sqlstate,
                    const std::string& message) {
    ASSERT_TRUE(refusal) << "accepted";
    EXPECT_EQ(refusal->sqlstate, sqlstate) << refusal->message;
    EXPECT_THAT(refusal->message, HasSubstr(message));
    EXPECT_EQ(db.scalar("SELECT count(*) FROM event_publication"), "0") << "nothing inserted";
}

TEST(HostileInput, PayloadThatIsNotJsonIsRefusedByTheCast) {
    const TestDatabase db;
    for (const char* text : {R"({"a": )", "{'a': 1}", R"({"a": 1} trailing)", ""}) {
        SCOPED_TRACE(text);
        expect_refused(db, try_publish(db, "acme", "WebsiteRegistered", text), "22P02", "invalid input syntax");
    }
}

TEST(HostileInput, InvalidUtf8AndNulEscapesAreRefused) {
    const TestDatabase db;
    expect_refused(db, try_publish(db, "acme", "WebsiteRegistered", "{\"a\": \"\xff\xfe\"}"), "22021",
                   "invalid byte sequence");
    expect_refused(db, try_publish(db, "acme", "WebsiteRegistered", R"({"a": "x\u0000y"})"), "22P05",
                   "unsupported Unicode escape sequence");
}

TEST(HostileInput, DeeplyNestedJsonIsRefusedWithoutHarm) {
    const TestDatabase db;
    const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
    expect_refused(db, try_publish(db, "acme", "WebsiteRegistered", deep), "54001", "stack depth limit exceeded");
    const std::string deep_field = R"({"a": )" + std::string(1000, '[') + std::string(1000, ']') + "}";
    expect_refused(db, try_publish(db, "acme", "WebsiteRegistered", deep_field), "22023", R"(payload field "a" is nested)");
    EXPECT_EQ(db.scalar("SELECT 1"), "1") << "the server is still there";
}

TEST(HostileInput, OversizePayloadsAreRefusedWhateverTheirShape) {
    const TestDatabase db;
    const std::string megabyte = R"({"blob": ")" + std::string(1 << 20, 'x') + R"("})";
    expect_refused(db, try_publish(db, "acme", "WebsiteRegistered", megabyte), "22023", "larger than 8192 bytes");
    std::string many_fields = "{";
    for (int i = 0; i < 2000; ++i) many_fields += (i ? "," : "") + std::string(R"("f)") + std::to_string(i) + R"(":1)";
    many_fields += "}";
    expect_refused(db, try_publish(db, "acme", "WebsiteRegistered", many_fields), "22023", "larger than 8192 bytes");
    // 30 x 1e300 is ~400 bytes as sent, but jsonb prints each number with all 301 digits.
    std::string big_numbers = "{";
    for (int i = 0; i < 30; ++i) big_numbers += (i ? "," : "") + std::string(R"("n)") + std::to_string(i) + R"(":1e300)";
    big_numbers += "}";
    expect_refused(db, try_publish(db, "acme", "WebsiteRegistered", big_numbers), "22023", "larger than 8192 bytes");
}

TEST(HostileInput, NullAndOversizeArgumentsAreRefused) {
    const TestDatabase db;
    const std::string long_text(201, 'k');
    expect_refused(db, try_publish(db, std::nullopt, "WebsiteRegistered", "{}"), "22023", "company_id must be 1 to 100");
    expect_refused(db, try_publish(db, std::string(101, 'c'), "WebsiteRegistered", "{}"), "22023",
                   "company_id must be 1 to 100");
    expect_refused(db, try_publish(db, "acme", std::nullopt, "{}"), "22023", "event_type must be PascalCase");
    expect_refused(db, try_publish(db, "acme", "W" + std::string(100, 'x'), "{}"), "22023",
                   "event_type must be PascalCase");
    expect_refused(db, try_publish(db, "acme", "WebsiteRegistered", std::nullopt), "22023", "payload must be a JSON object");
    expect_refused(db, try_publish(db, "acme", "WebsiteRegistered", "{}", ""), "22023", "aggregate_key must be 1 to 200");
    expect_refused(db, try_publish(db, "acme", "WebsiteRegistered", "{}", long_text), "22023",
                   "aggregate_key must be 1 to 200");
    expect_refused(db, try_publish(db, "acme", "WebsiteRegistered", "{}", std::nullopt, ""), "22023",
                   "dedup_key must be 1 to 200");
    expect_refused(db, try_publish(db, "acme", "WebsiteRegistered", "{}", std::nullopt, long_text), "22023",
                   "dedup_key must be 1 to 200");
}

// What SafePayload accepts, outbox_publish must accept too: the SDK promises they enforce
// the same limit, so a publisher never meets a database refusal it could not foresee.
// Returns whether SafePayload accepted it.
bool expect_publishable_or_payload_error(const TestDatabase& db, const SafePayload& payload) {
    std::string json;
    try {
        json = payload.json();
    } catch (const PayloadError&) {
        return false;  // refused up front: fine
    }
    pqxx::connection conn(db.url());
    pqxx::work tx(conn);
    EXPECT_NO_THROW(sdk::publish(tx, "acme", "WebsiteRegistered", payload)) << json.size() << " bytes accepted by SafePayload";
    return true;
}

TEST(HostileInput, SafePayloadAtItsSizeLimitIsAcceptedByOutboxPublish) {
    const TestDatabase db;
    const PayloadSchema schema{{"blob", FieldKind::String, 2 * kMaxPayloadBytes}, {"n", FieldKind::Integer, 0, false}};
    // Around the limit, with one field and with two (each ':' and ',' gains a space in jsonb).
    std::size_t largest_one = 0, largest_two = 0;
    for (std::size_t size = kMaxPayloadBytes - 30; size <= kMaxPayloadBytes; ++size) {
        SCOPED_TRACE(size);
        SafePayload one(schema);
        one.set("blob", std::string(size - std::string(R"({"blob":""})").size(), 'a'));
        if (expect_publishable_or_payload_error(db, one)) largest_one = size;
        SafePayload two(schema);
        two.set("blob", std::string(size - std::string(R"({"blob":"","n":1})").size(), 'a')).set("n", 1);
        if (expect_publishable_or_payload_error(db, two)) largest_two = size;
    }
    EXPECT_EQ(largest_one, kMaxPayloadBytes - 1) << "up to the limit as stored, not less";
    EXPECT_EQ(largest_two, kMaxPayloadBytes - 3);
}

TEST(HostileInput, SafePayloadNumbersThatPostgresWritesOutInFullStayWithinTheLimit) {
    const TestDatabase db;
    const PayloadSchema schema{{"a", FieldKind::Number}, {"b", FieldKind::Number}, {"c", FieldKind::Number},
                               {"d", FieldKind::Number}, {"e", FieldKind::Number}, {"f", FieldKind::Number},
                               {"g", FieldKind::Number}, {"h", FieldKind::Number}, {"i", FieldKind::Number},
                               {"j", FieldKind::Number}, {"k", FieldKind::Number}, {"l", FieldKind::Number},
                               {"m", FieldKind::Number}, {"n", FieldKind::Number}, {"o", FieldKind::Number},
                               {"p", FieldKind::Number}, {"q", FieldKind::Number}, {"r", FieldKind::Number},
                               {"s", FieldKind::Number}, {"t", FieldKind::Number}, {"u", FieldKind::Number},
                               {"v", FieldKind::Number}, {"w", FieldKind::Number}, {"x", FieldKind::Number},
                               {"y", FieldKind::Number}, {"z", FieldKind::Number}};
    int accepted = 0;
    for (const double value : {1.7976931348623157e308, 1e300, -1e-300, 4.9e-324, 1.5e-7}) {
        SCOPED_TRACE(value);
        SafePayload payload(schema);
        for (const char* name : {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q",
                                 "r", "s", "t", "u", "v", "w", "x", "y", "z"}) {
            payload.set(name, value);
        }
        accepted += expect_publishable_or_payload_error(db, payload) ? 1 : 0;
    }
    EXPECT_EQ(accepted, 3) << "1e300, -1e-300 and 1.5e-7 fit (about 8,000 bytes as stored); the others do not";
}

TEST(HostileInput, SafePayloadRefusesTextPostgresCannotStoreWithAPayloadError) {
    const PayloadSchema schema{{"note", FieldKind::String}};
    for (const std::string& value : {std::string("caf\xc3"), std::string("\xff\xfe"), std::string("a\xed\xa0\x80z"),
                                    std::string("x\0y", 3)}) {
        SCOPED_TRACE(testing::PrintToString(value));
        try {
            SafePayload payload(schema);
            payload.set("note", value);
            (void)payload.json();
            ADD_FAILURE() << "accepted";
        } catch (const PayloadError& e) {
            EXPECT_EQ(e.field(), "note");
        } catch (const std::exception& e) {
            ADD_FAILURE() << "not a PayloadError: " << e.what();
        }
    }
}

}  // namespace
}  // namespace outbox::test
