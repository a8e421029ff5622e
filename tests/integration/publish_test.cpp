// Publishing through outbox_publish() and the C++ publisher API, and the constraints the
// schema enforces on its own, against a real PostgreSQL.

#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "outbox/publisher.hpp"
#include "support/pg_fixture.hpp"

namespace {

using outbox::test::TestDatabase;
using ::testing::HasSubstr;

constexpr const char* kPublish = "SELECT outbox_publish($1, $2, $3::jsonb, $4, $5)::text";
const char* const kNull = nullptr;

std::string publish(pqxx::work& tx, const std::string& company, const std::string& type, const std::string& payload,
                    const char* aggregate_key = nullptr, const char* dedup_key = nullptr) {
    return tx.exec_params1(kPublish, company, type, payload, aggregate_key, dedup_key)[0].as<std::string>();
}

// Calls outbox_publish with `payload`, expects the database to refuse it with SQLSTATE 22023
// and a message containing `expected`, and checks that nothing was inserted.
void expect_refused(const TestDatabase& db, const std::string& company, const std::string& type,
                    const std::string& payload, const std::string& expected) {
    pqxx::connection conn{db.url()};
    pqxx::work tx{conn};
    try {
        publish(tx, company, type, payload);
        ADD_FAILURE() << "outbox_publish accepted " << payload;
    } catch (const pqxx::sql_error& e) {
        EXPECT_EQ(e.sqlstate(), "22023") << e.what();
        EXPECT_THAT(e.what(), HasSubstr(expected));
    }
    EXPECT_EQ(db.scalar("SELECT count(*) FROM event_publication"), "0");
}

class Receiver final : public pqxx::notification_receiver {
public:
    using pqxx::notification_receiver::notification_receiver;
    void operator()(const std::string& payload, int) override { payloads.push_back(payload); }
    std::vector<std::string> payloads;
};

// Waits until the receiver's connection has something, or `timeout` passes.
void await(pqxx::connection& conn, Receiver& receiver, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (receiver.payloads.empty() && std::chrono::steady_clock::now() < deadline) {
        conn.await_notification(0, 50'000);
    }
}

TEST(Publish, InsertsAPendingRowReadyToClaim) {
    const TestDatabase db;
    pqxx::connection conn{db.url()};
    pqxx::work tx{conn};
    const std::string id = publish(tx, "acme", "WebsiteRegistered", R"({"website_id": "w-1", "domain": "example.com"})",
                                   "w-1");
    tx.commit();

    const auto row = db.exec("SELECT company_id, event_type, aggregate_key, dedup_key IS NULL, payload::text, status, "
                             "attempt_count, version, next_attempt_at <= now(), lease_owner IS NULL, "
                             "lease_token IS NULL, lease_expires_at IS NULL, completed_at IS NULL "
                             "FROM event_publication WHERE event_id = '" + id + "'");
    ASSERT_EQ(row.size(), 1U);
    EXPECT_EQ(row[0][0].as<std::string>(), "acme");
    EXPECT_EQ(row[0][1].as<std::string>(), "WebsiteRegistered");
    EXPECT_EQ(row[0][2].as<std::string>(), "w-1");
    EXPECT_TRUE(row[0][3].as<bool>());
    EXPECT_EQ(row[0][4].as<std::string>(), R"({"domain": "example.com", "website_id": "w-1"})");
    EXPECT_EQ(row[0][5].as<std::string>(), "PENDING");
    EXPECT_EQ(row[0][6].as<int>(), 0);
    EXPECT_EQ(row[0][7].as<long long>(), 1);
    for (int column = 8; column <= 12; ++column) EXPECT_TRUE(row[0][column].as<bool>()) << "column " << column;
}

TEST(Publish, RollbackLeavesNothing) {
    const TestDatabase db;
    {
        pqxx::connection conn{db.url()};
        pqxx::work tx{conn};
        tx.exec0("CREATE TABLE website (id text PRIMARY KEY)");
        tx.commit();
    }
    {
        pqxx::connection conn{db.url()};
        pqxx::work tx{conn};
        tx.exec0("INSERT INTO website VALUES ('w-1')");
        publish(tx, "acme", "WebsiteRegistered", R"({"website_id": "w-1"})");
        tx.abort();
    }
    EXPECT_EQ(db.scalar("SELECT count(*) FROM event_publication"), "0");
    EXPECT_EQ(db.scalar("SELECT count(*) FROM website"), "0");
}

TEST(Publish, DedupKeyReturnsTheFirstEventId) {
    const TestDatabase db;
    pqxx::connection conn{db.url()};
    pqxx::work tx{conn};
    const std::string first = publish(tx, "acme", "WebsiteRegistered", R"({"n": 1})", kNull, "w-1");
    const std::string second = publish(tx, "acme", "WebsiteRegistered", R"({"n": 2})", kNull, "w-1");
    const std::string other_company = publish(tx, "globex", "WebsiteRegistered", R"({"n": 3})", kNull, "w-1");
    const std::string other_type = publish(tx, "acme", "WebsiteDeleted", R"({"n": 4})", kNull, "w-1");
    tx.commit();

    EXPECT_EQ(second, first);
    EXPECT_NE(other_company, first) << "dedup is per (company_id, event_type, dedup_key)";
    EXPECT_NE(other_type, first);
    EXPECT_EQ(db.scalar("SELECT count(*) FROM event_publication"), "3");
    EXPECT_EQ(db.scalar("SELECT payload->>'n' FROM event_publication WHERE event_id = '" + first + "'"), "1")
        << "the first payload is kept";
}

TEST(Publish, ConcurrentDedupOnTwoConnectionsInsertsOneRow) {
    const TestDatabase db;
    pqxx::connection first_conn{db.url()};
    pqxx::connection second_conn{db.url()};
    const std::string second_pid = std::to_string(second_conn.backendpid());

    pqxx::work first_tx{first_conn};
    const std::string first = publish(first_tx, "acme", "WebsiteRegistered", R"({"n": 1})", kNull, "w-1");

    // The second publisher blocks on the unique index until the first commits.
    auto second = std::async(std::launch::async, [&] {
        pqxx::work tx{second_conn};
        std::string id = publish(tx, "acme", "WebsiteRegistered", R"({"n": 2})", kNull, "w-1");
        tx.commit();
        return id;
    });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (db.scalar("SELECT coalesce(wait_event_type, '') FROM pg_stat_activity WHERE pid = " + second_pid) != "Lock") {
        ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the second publisher never waited for the first";
        ASSERT_EQ(second.wait_for(std::chrono::milliseconds(20)), std::future_status::timeout)
            << "the second publisher finished before the first committed";
    }
    first_tx.commit();

    ASSERT_EQ(second.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    EXPECT_EQ(second.get(), first);
    EXPECT_EQ(db.scalar("SELECT count(*) FROM event_publication"), "1");
}

TEST(Publish, RefusesNestedObjectPayload) {
    const TestDatabase db;
    expect_refused(db, "acme", "WebsiteRegistered", R"({"id": "w-1", "owner": {"name": "x"}})",
                   R"(payload field "owner" is nested)");
}

TEST(Publish, RefusesArrayField) {
    const TestDatabase db;
    expect_refused(db, "acme", "WebsiteRegistered", R"({"tags": ["a", "b"]})", R"(payload field "tags" is nested)");
}

TEST(Publish, RefusesNonObjectPayload) {
    const TestDatabase db;
    for (const char* payload : {"[1, 2]", R"("text")", "42", "null"}) {
        expect_refused(db, "acme", "WebsiteRegistered", payload, "payload must be a JSON object");
    }
}

TEST(Publish, RefusesPayloadLargerThan8192Bytes) {
    const TestDatabase db;
    expect_refused(db, "acme", "WebsiteRegistered", R"({"blob": ")" + std::string(8200, 'x') + R"("})",
                   "payload is larger than 8192 bytes");
}

TEST(Publish, RefusesBadEventType) {
    const TestDatabase db;
    for (const char* type : {"website_registered", "", "Website Registered", "1Website"}) {
        expect_refused(db, "acme", type, "{}", "event_type must be PascalCase");
    }
}

TEST(Publish, RefusesEmptyCompanyId) {
    const TestDatabase db;
    expect_refused(db, "", "WebsiteRegistered", "{}", "company_id must be 1 to 100 characters");
}

TEST(Publish, NotifiesWorkersOnlyAfterCommit) {
    const TestDatabase db;
    pqxx::connection listener{db.url()};
    Receiver receiver{listener, "outboxd_events"};
    pqxx::connection publisher{db.url()};

    pqxx::work tx{publisher};
    publish(tx, "acme", "WebsiteRegistered", "{}");
    await(listener, receiver, std::chrono::milliseconds(300));
    EXPECT_TRUE(receiver.payloads.empty()) << "NOTIFY must not be delivered before commit";

    tx.commit();
    await(listener, receiver, std::chrono::seconds(10));
    ASSERT_EQ(receiver.payloads.size(), 1U);
    EXPECT_EQ(receiver.payloads[0], "WebsiteRegistered");
}

TEST(Publish, RolledBackPublishNotifiesNobody) {
    const TestDatabase db;
    pqxx::connection listener{db.url()};
    Receiver receiver{listener, "outboxd_events"};
    pqxx::connection publisher{db.url()};
    {
        pqxx::work tx{publisher};
        publish(tx, "acme", "WebsiteRegistered", "{}");
        tx.abort();
    }
    await(listener, receiver, std::chrono::milliseconds(500));
    EXPECT_TRUE(receiver.payloads.empty());
}

TEST(Publish, CppPublisherWritesTheSameRow) {
    static const outbox::sdk::PayloadSchema kWebsiteRegistered{
        {"website_id", outbox::sdk::FieldKind::Uuid},
        {"domain", outbox::sdk::FieldKind::String, 253},
    };
    const std::string website_id = "5f0c6f3e-9a43-4d4e-8d6a-0f2b9f4f6a11";
    const TestDatabase db;
    pqxx::connection conn{db.url()};

    pqxx::work tx{conn};
    outbox::sdk::SafePayload payload{kWebsiteRegistered};
    payload.set("website_id", website_id).set("domain", "example.com");
    const std::string id = outbox::sdk::publish(tx, "acme", "WebsiteRegistered", payload,
                                                {.aggregate_key = website_id, .dedup_key = website_id});
    // A designated initializer naming only some members trips GCC 12's -Wmissing-field-initializers.
    outbox::sdk::PublishOptions dedup_only;
    dedup_only.dedup_key = website_id;
    const std::string again = outbox::sdk::publish(tx, "acme", "WebsiteRegistered", payload, dedup_only);
    tx.commit();

    EXPECT_EQ(again, id);
    const auto row = db.exec("SELECT company_id, event_type, aggregate_key, dedup_key, payload::text, status, "
                             "attempt_count, version FROM event_publication");
    ASSERT_EQ(row.size(), 1U);
    EXPECT_EQ(row[0][0].as<std::string>(), "acme");
    EXPECT_EQ(row[0][1].as<std::string>(), "WebsiteRegistered");
    EXPECT_EQ(row[0][2].as<std::string>(), website_id);
    EXPECT_EQ(row[0][3].as<std::string>(), website_id);
    EXPECT_EQ(row[0][4].as<std::string>(), R"({"domain": "example.com", "website_id": ")" + website_id + R"("})");
    EXPECT_EQ(row[0][5].as<std::string>(), "PENDING");
    EXPECT_EQ(row[0][6].as<int>(), 0);
    EXPECT_EQ(row[0][7].as<long long>(), 1);
}

TEST(Publish, CppPublisherSurfacesDatabaseRefusal) {
    static const outbox::sdk::PayloadSchema kSchema{{"id", outbox::sdk::FieldKind::Identifier}};
    const TestDatabase db;
    pqxx::connection conn{db.url()};
    pqxx::work tx{conn};
    outbox::sdk::SafePayload payload{kSchema};
    payload.set("id", "w-1");
    EXPECT_THROW(outbox::sdk::publish(tx, "acme", "not_pascal_case", payload), pqxx::sql_error);
}

// The operator trail is append-only, enforced by the database whoever connects.
void expect_append_only(const TestDatabase& db, const std::string& table, const std::string& insert) {
    db.exec(insert);
    for (const std::string& sql : {"UPDATE " + table + " SET actor = 'someone-else'", "DELETE FROM " + table,
                                  "TRUNCATE " + table}) {
        pqxx::connection conn{db.url()};
        pqxx::work tx{conn};
        try {
            tx.exec0(sql);
            ADD_FAILURE() << sql << " was allowed";
        } catch (const pqxx::insufficient_privilege& e) {
            // SQLSTATE 42501; libpqxx 6.4 maps it to this type but leaves sqlstate() empty.
            EXPECT_THAT(e.what(), HasSubstr(table + " is append-only"));
        }
    }
    EXPECT_EQ(db.scalar("SELECT count(*) FROM " + table + " WHERE actor = 'operator-1'"), "1");
}

TEST(PublishSchema, ManualRetryRecordsAreImmutable) {
    const TestDatabase db;
    expect_append_only(db, "outbox_manual_retry",
                       "INSERT INTO outbox_manual_retry (event_id, company_id, actor, reason, idempotency_key_hash, "
                       "request_hash, previous_attempt_count, previous_status, previous_version, new_version) "
                       "VALUES (gen_random_uuid(), 'acme', 'operator-1', 'remote API fixed, re-driving', 'k', 'r', "
                       "8, 'REVIEW_REQUIRED', 9, 10)");
}

TEST(PublishSchema, AuditEventsAreImmutable) {
    const TestDatabase db;
    expect_append_only(db, "audit_event",
                       "INSERT INTO audit_event (actor, action, company_id, target_id) "
                       "VALUES ('operator-1', 'outbox.retry', 'acme', 'e-1')");
}

void expect_check_violation(const TestDatabase& db, const std::string& sql, const std::string& constraint) {
    pqxx::connection conn{db.url()};
    pqxx::work tx{conn};
    try {
        tx.exec0(sql);
        ADD_FAILURE() << sql << " was allowed";
    } catch (const pqxx::check_violation& e) {
        EXPECT_THAT(e.what(), HasSubstr(constraint));
    }
}

TEST(PublishSchema, CheckConstraintsRejectInvalidRows) {
    const TestDatabase db;
    const std::string insert = "INSERT INTO event_publication (company_id, event_type, payload";
    expect_check_violation(db, insert + ", status) VALUES ('acme', 'WebsiteRegistered', '{}', 'DONE')",
                           "event_publication_status_check");
    expect_check_violation(db, insert + ", status) VALUES ('acme', 'WebsiteRegistered', '{}', 'PROCESSING')",
                           "event_publication_lease_check");
    expect_check_violation(db, insert + ", status) VALUES ('acme', 'WebsiteRegistered', '{}', 'COMPLETED')",
                           "event_publication_completed_check");
    expect_check_violation(db, insert + ", status) VALUES ('acme', 'WebsiteRegistered', '{}', 'DISCARDED')",
                           "event_publication_completed_check");
    expect_check_violation(db, insert + ", status, completed_at) VALUES ('acme', 'WebsiteRegistered', '{}', 'PENDING', now())",
                           "event_publication_completed_check");
    expect_check_violation(db, insert + ", attempt_count) VALUES ('acme', 'WebsiteRegistered', '{}', -1)",
                           "event_publication_attempt_count_check");
    expect_check_violation(db, insert + ") VALUES ('acme', 'WebsiteRegistered', '[]')",
                           "event_publication_payload_check");
    expect_check_violation(db, insert + ", last_error_code) VALUES ('acme', 'WebsiteRegistered', '{}', 'raw text')",
                           "event_publication_last_error_code_check");
    EXPECT_EQ(db.scalar("SELECT count(*) FROM event_publication"), "0");
}

}  // namespace

// Event ids are time-ordered (UUID version 7 layout), so new events and their consumption
// rows land together at the right edge of the primary-key indexes however large the table.
TEST(PublishIds, EventIdsAreVersionSevenAndOrderedByPublishTime) {
    TestDatabase db;
    pqxx::connection conn{db.url()};
    std::vector<std::string> ids;
    for (int i = 0; i < 5; ++i) {
        pqxx::work tx{conn};
        ids.push_back(publish(tx, "acme", "WebsiteRegistered", R"({"n": 1})"));
        tx.commit();
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    for (std::size_t i = 0; i < ids.size(); ++i) {
        ASSERT_EQ(ids[i].size(), 36u);
        EXPECT_EQ(ids[i][14], '7') << ids[i];
        EXPECT_NE(std::string("89ab").find(ids[i][19]), std::string::npos) << "RFC 4122 variant: " << ids[i];
        if (i > 0) {
            EXPECT_LT(ids[i - 1], ids[i]);
        }
    }
    const auto millis = std::stoll(db.scalar("SELECT ('x' || substr(replace(event_id::text, '-', ''), 1, 12))::bit(48)::bigint "
                                             "FROM event_publication WHERE event_id = '" + ids[0] + "'"));
    const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch()).count();
    EXPECT_NEAR(static_cast<double>(millis), static_cast<double>(now), 60'000.0) << "the first 48 bits are Unix milliseconds";
}
