// aggregate_key screening: the C++ publish() and SQL outbox_publish() refuse the same values
// (tests/support/free_text_cases.hpp) with the same rule, never echo the value, and insert
// nothing.

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "outbox/publisher.hpp"
#include "support/free_text_cases.hpp"
#include "support/pg_fixture.hpp"

namespace {

using outbox::test::kFreeTextCases;
using outbox::test::TestDatabase;
using ::testing::HasSubstr;
using ::testing::Not;

const outbox::sdk::PayloadSchema kSchema{{"n", outbox::sdk::FieldKind::Integer}};

TEST(FreeText, CxxPublishScreensAggregateKey) {
    const TestDatabase db;
    pqxx::connection conn{db.url()};
    int accepted = 0;
    for (const auto& c : kFreeTextCases) {
        SCOPED_TRACE(c.value);
        pqxx::work tx{conn};
        outbox::sdk::SafePayload payload{kSchema};
        payload.set("n", 1);
        try {
            outbox::sdk::publish(tx, "acme", "ThingHappened", payload, {.aggregate_key = std::string(c.value)});
            tx.commit();
            EXPECT_EQ(c.rule, nullptr) << "accepted, expected: " << c.rule;
            ++accepted;
        } catch (const outbox::sdk::FreeTextError& e) {
            ASSERT_NE(c.rule, nullptr) << e.what();
            EXPECT_EQ(std::string(e.what()), std::string("aggregate_key: ") + c.rule);
            EXPECT_THAT(e.what(), Not(HasSubstr(c.value)));
            EXPECT_EQ(e.field(), "aggregate_key");
        }
    }
    EXPECT_EQ(db.scalar("SELECT count(*) FROM event_publication"), std::to_string(accepted));
    EXPECT_EQ(db.scalar("SELECT count(*) FROM event_publication WHERE aggregate_key IS NULL"), "0");
}

TEST(FreeText, SqlPublishScreensAggregateKeyWithTheSameRules) {
    const TestDatabase db;
    pqxx::connection conn{db.url()};
    int accepted = 0;
    for (const auto& c : kFreeTextCases) {
        SCOPED_TRACE(c.value);
        pqxx::work tx{conn};
        try {
            tx.exec_params("SELECT outbox_publish('acme', 'ThingHappened', '{\"n\": 1}'::jsonb, $1)", std::string(c.value));
            tx.commit();
            EXPECT_EQ(c.rule, nullptr) << "accepted, expected: " << c.rule;
            ++accepted;
        } catch (const pqxx::sql_error& e) {
            ASSERT_NE(c.rule, nullptr) << e.what();
            EXPECT_EQ(e.sqlstate(), "22023");
            EXPECT_THAT(e.what(), HasSubstr(std::string("outbox_publish: aggregate_key: ") + c.rule));
            EXPECT_THAT(e.what(), Not(HasSubstr(c.value)));
        }
    }
    EXPECT_EQ(db.scalar("SELECT count(*) FROM event_publication"), std::to_string(accepted));
}

}  // namespace
