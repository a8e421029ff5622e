// Bulk re-drive of REVIEW_REQUIRED events (BulkRetryService, shared by
// POST /api/v1/admin/outbox-events/retry and `outboxd retry --event-type/--code`): the
// filter, the limit, tenant isolation, one history and audit row per event, idempotency.
#include <gtest/gtest.h>

#include <pqxx/pqxx>

#include "admin_support.hpp"
#include "operations/bulk_retry_service.hpp"
#include "operations/retry_service.hpp"
#include "support/child_process.hpp"

namespace outbox::test {
namespace {

using nlohmann::json;

const std::string kBulkReason = "remote fixed after incident 42";

operations::BulkRetryFilter filter(std::optional<std::string> type, std::optional<std::string> code,
                              std::optional<std::string> before, int limit) {
    operations::BulkRetryFilter f;
    f.event_type = std::move(type);
    f.last_error_code = std::move(code);
    f.occurred_before = std::move(before);
    f.limit = limit;
    return f;
}

class BulkRetry : public ::testing::Test {
protected:
    // A REVIEW_REQUIRED event (attempt_count 3, version 4) with this code, `age_minutes` old.
    std::string review(const std::string& company, const std::string& type, const std::string& code, int age_minutes) {
        const std::string id = review_event(db_, company, type);
        db_.exec("UPDATE event_publication SET last_error_code = '" + code + "', occurred_at = now() - interval '" +
                 std::to_string(age_minutes) + " minutes' WHERE event_id = '" + id + "'");
        return id;
    }
    operations::BulkRetryResult bulk(operations::BulkRetryFilter filter, const std::string& key,
                                std::optional<std::string> company = "acme", const std::string& reason = kBulkReason) {
        pqxx::connection conn(db_.url());
        operations::BulkRetryRequest request{std::move(filter), reason, key, "alice", std::move(company), "api"};
        return operations::BulkRetryService(conn).retry(request);
    }
    static std::vector<std::string> ids_of(const operations::BulkRetryResult& result) {
        const auto* accepted = std::get_if<operations::BulkRetryAccepted>(&result);
        if (accepted == nullptr) {
            ADD_FAILURE() << "rejected: " << std::get<operations::RetryRejected>(result).code;
            return {};
        }
        return accepted->event_ids;
    }
    static std::string rejection(const operations::BulkRetryResult& result) {
        const auto* rejected = std::get_if<operations::RetryRejected>(&result);
        return rejected == nullptr ? "accepted" : rejected->code;
    }
    std::string state(const std::string& id) const {
        return db_.scalar("SELECT status || '/' || attempt_count || '/' || version FROM event_publication WHERE event_id = '" +
                          id + "'");
    }
    long long count(const std::string& sql) const { return std::stoll(db_.scalar(sql)); }

    TestDatabase db_;
};

TEST_F(BulkRetry, RedrivesOnlyTheCallersCompanyWithOneHistoryAndAuditRowPerEvent) {
    const auto a1 = review("acme", "TestRequested", "HTTP_422", 30);
    const auto a2 = review("acme", "TestRequested", "HTTP_422", 20);
    const auto g1 = review("globex", "TestRequested", "HTTP_422", 25);
    const auto g2 = review("globex", "TestRequested", "HTTP_422", 10);

    const auto ids = ids_of(bulk(filter("TestRequested", "HTTP_422", std::nullopt, 100), "k-1"));
    EXPECT_EQ(ids, (std::vector<std::string>{a1, a2})) << "oldest first, this company only";
    EXPECT_EQ(state(a1), "PENDING/0/5");
    EXPECT_EQ(state(a2), "PENDING/0/5");
    EXPECT_EQ(state(g1), "REVIEW_REQUIRED/3/4") << "another company's events are untouched";
    EXPECT_EQ(state(g2), "REVIEW_REQUIRED/3/4");

    const pqxx::result history = db_.exec(
        "SELECT event_id::text, company_id, actor, reason, previous_attempt_count, previous_status, previous_version, "
        "new_version FROM outbox_manual_retry ORDER BY event_id");
    ASSERT_EQ(history.size(), 2u);
    for (const auto& row : history) {
        EXPECT_EQ(row[1].as<std::string>(), "acme");
        EXPECT_EQ(row[2].as<std::string>(), "alice");
        EXPECT_EQ(row[3].as<std::string>(), kBulkReason);
        EXPECT_EQ(row[4].as<int>(), 3);
        EXPECT_EQ(row[5].as<std::string>(), "REVIEW_REQUIRED");
        EXPECT_EQ(row[6].as<long long>(), 4);
        EXPECT_EQ(row[7].as<long long>(), 5);
    }
    EXPECT_EQ(count("SELECT count(*) FROM audit_event WHERE action = 'outbox.manual_retry' AND company_id = 'acme' "
                    "AND detail ? 'bulk_retry_id' AND target_id IN ('" + a1 + "', '" + a2 + "')"),
              2);
    EXPECT_EQ(count("SELECT count(*) FROM audit_event WHERE company_id = 'globex'"), 0);
    EXPECT_EQ(count("SELECT count(*) FROM outbox_bulk_retry WHERE company_id = 'acme'"), 1);

    const auto other = ids_of(bulk(filter(std::nullopt, "HTTP_422", std::nullopt, 100), "k-1", "globex"));
    EXPECT_EQ(other, (std::vector<std::string>{g1, g2})) << "keys are per company";
}

TEST_F(BulkRetry, SameKeyAndRequestReplaysTheFirstAnswerAndAnotherRequestIs422) {
    const auto a1 = review("acme", "TestRequested", "HTTP_503", 30);
    const auto first = bulk(filter(std::nullopt, "HTTP_503", std::nullopt, 100), "k-2");
    ASSERT_EQ(ids_of(first), std::vector<std::string>{a1});
    EXPECT_FALSE(std::get<operations::BulkRetryAccepted>(first).replayed);

    const auto a2 = review("acme", "TestRequested", "HTTP_503", 5);  // would match now
    const auto again = bulk(filter(std::nullopt, "HTTP_503", std::nullopt, 100), "k-2");
    EXPECT_EQ(ids_of(again), std::vector<std::string>{a1}) << "the first answer, not a new run";
    EXPECT_TRUE(std::get<operations::BulkRetryAccepted>(again).replayed);
    EXPECT_EQ(state(a2), "REVIEW_REQUIRED/3/4");
    EXPECT_EQ(count("SELECT count(*) FROM outbox_manual_retry"), 1);

    EXPECT_EQ(rejection(bulk(filter(std::nullopt, "HTTP_503", std::nullopt, 100), "k-2", "acme", "another reason entirely")),
              "IDEMPOTENCY_KEY_REUSED");
    EXPECT_EQ(rejection(bulk(filter(std::nullopt, "HTTP_503", std::nullopt, 5), "k-2")), "IDEMPOTENCY_KEY_REUSED");

    // Keys are shared with the one-event retry: a key used there is taken here, and back.
    pqxx::connection conn(db_.url());
    operations::RetryRequest single{a2, 4, kBulkReason, "k-3", "alice", "acme", "api"};
    ASSERT_TRUE(std::holds_alternative<operations::RetryAccepted>(operations::RetryService(conn).retry(single)));
    EXPECT_EQ(rejection(bulk(filter(std::nullopt, "HTTP_503", std::nullopt, 100), "k-3")), "IDEMPOTENCY_KEY_REUSED");
    const auto a3 = review("acme", "TestRequested", "HTTP_503", 1);
    operations::RetryRequest reuse{a3, 4, kBulkReason, "k-2", "alice", "acme", "api"};
    const auto refused = operations::RetryService(conn).retry(reuse);
    ASSERT_TRUE(std::holds_alternative<operations::RetryRejected>(refused));
    EXPECT_EQ(std::get<operations::RetryRejected>(refused).code, "IDEMPOTENCY_KEY_REUSED");
}

TEST_F(BulkRetry, LimitTakesTheOldestAndFiltersCombine) {
    std::vector<std::string> old_ones;
    for (int i = 0; i < 5; ++i) old_ones.push_back(review("acme", "TestRequested", "HTTP_422", 100 - i));
    const auto other_code = review("acme", "TestRequested", "HTTP_400", 90);
    const auto other_type = review("acme", "EchoRequested", "HTTP_422", 90);
    const auto recent = review("acme", "TestRequested", "HTTP_422", 1);

    EXPECT_EQ(ids_of(bulk(filter("TestRequested", "HTTP_422", std::nullopt, 2), "l-1")),
              (std::vector<std::string>{old_ones[0], old_ones[1]}));
    EXPECT_EQ(state(old_ones[2]), "REVIEW_REQUIRED/3/4");

    const std::string cutoff = db_.scalar("SELECT to_char((now() - interval '30 minutes') AT TIME ZONE 'UTC', "
                                          "'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')");
    EXPECT_EQ(ids_of(bulk(filter(std::nullopt, "HTTP_422", cutoff, 1000), "l-2")),
              (std::vector<std::string>{old_ones[2], old_ones[3], old_ones[4], other_type}))
        << "code and time, any type; the recent one is after the cutoff";
    EXPECT_EQ(state(recent), "REVIEW_REQUIRED/3/4");
    EXPECT_EQ(ids_of(bulk(filter("TestRequested", std::nullopt, std::nullopt, 100), "l-3")), (std::vector<std::string>{other_code, recent}));
    EXPECT_TRUE(ids_of(bulk(filter("TestRequested", std::nullopt, std::nullopt, 100), "l-4")).empty()) << "nothing left to re-drive";
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE status = 'REVIEW_REQUIRED'"), 0);
}

TEST_F(BulkRetry, BadRequestsChangeNothing) {
    const auto a1 = review("acme", "TestRequested", "HTTP_422", 30);
    EXPECT_EQ(rejection(bulk(filter(std::nullopt, std::nullopt, std::nullopt, 100), "v-1")), "INVALID_FILTER");
    EXPECT_EQ(rejection(bulk(filter("lower", std::nullopt, std::nullopt, 100), "v-2")), "INVALID_FILTER");
    EXPECT_EQ(rejection(bulk(filter(std::nullopt, "http 500", std::nullopt, 100), "v-3")), "INVALID_FILTER");
    EXPECT_EQ(rejection(bulk(filter(std::nullopt, "HTTP_422", std::nullopt, 0), "v-4")), "INVALID_LIMIT");
    EXPECT_EQ(rejection(bulk(filter(std::nullopt, "HTTP_422", std::nullopt, 1001), "v-5")), "INVALID_LIMIT");
    EXPECT_EQ(rejection(bulk(filter(std::nullopt, "HTTP_422", "yesterday", 100), "v-6")),
              "INVALID_OCCURRED_BEFORE");
    EXPECT_EQ(rejection(bulk(filter(std::nullopt, "HTTP_422", "2026-02-30T00:00:00Z", 100), "v-7")),
              "INVALID_OCCURRED_BEFORE");
    EXPECT_EQ(rejection(bulk(filter(std::nullopt, "HTTP_422", std::nullopt, 100), "v-8", "acme", "short")), "INVALID_REASON");
    EXPECT_EQ(rejection(bulk(filter(std::nullopt, "HTTP_422", std::nullopt, 100), "")), "MISSING_IDEMPOTENCY_KEY");
    EXPECT_EQ(state(a1), "REVIEW_REQUIRED/3/4");
    EXPECT_EQ(count("SELECT count(*) FROM outbox_bulk_retry"), 0);
}

TEST_F(BulkRetry, CommandLineRedrivesEveryCompanyAndTheOneEventFormStillWorks) {
    const auto a1 = review("acme", "TestRequested", "HTTP_422", 30);
    const auto g1 = review("globex", "TestRequested", "HTTP_422", 20);
    const auto single = review("acme", "TestRequested", "HTTP_400", 10);
    const std::map<std::string, std::string> env{{"OUTBOX_DATABASE_URL", db_.url()}};
    auto [code, out] = run_command({OUTBOXD_BINARY, "retry", "--event-type", "TestRequested", "--code", "HTTP_422",
                                    "--limit", "10", "--reason", kBulkReason, "--idempotency-key", "cli-1"},
                                   env);
    EXPECT_EQ(code, 0) << out;
    EXPECT_NE(out.find("2 event(s) re-driven"), std::string::npos) << out;
    EXPECT_NE(out.find(a1), std::string::npos);
    EXPECT_NE(out.find(g1), std::string::npos);
    EXPECT_EQ(state(a1), "PENDING/0/5");
    EXPECT_EQ(state(g1), "PENDING/0/5");
    EXPECT_EQ(state(single), "REVIEW_REQUIRED/3/4");
    EXPECT_EQ(count("SELECT count(*) FROM audit_event WHERE actor LIKE 'cli:%' AND detail->>'channel' = 'cli'"), 2);

    std::tie(code, out) = run_command({OUTBOXD_BINARY, "retry", "--event-type", "TestRequested", "--code", "HTTP_422",
                                       "--limit", "10", "--reason", kBulkReason, "--idempotency-key", "cli-1"},
                                      env);
    EXPECT_EQ(code, 0) << out;
    EXPECT_NE(out.find("nothing done now"), std::string::npos) << out;

    std::tie(code, out) = run_command({OUTBOXD_BINARY, "retry", single, "--expected-version", "4", "--reason", kBulkReason,
                                       "--idempotency-key", "cli-2"},
                                      env);
    EXPECT_EQ(code, 0) << out;
    EXPECT_EQ(state(single), "PENDING/0/5");

    std::tie(code, out) = run_command({OUTBOXD_BINARY, "retry", "--reason", kBulkReason}, env);
    EXPECT_EQ(code, 2) << out;
    std::tie(code, out) = run_command({OUTBOXD_BINARY, "retry", single, "--code", "HTTP_400", "--reason", kBulkReason}, env);
    EXPECT_EQ(code, 2) << out;
}

}  // namespace
}  // namespace outbox::test
