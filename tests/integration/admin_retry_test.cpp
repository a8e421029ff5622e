// POST /api/v1/admin/outbox-events/{id}/retry and the retry service behind it (shared with
// `outboxd retry`): validation, version checks, idempotency, concurrency, history, and the
// event's handlers really running again.
#include <gtest/gtest.h>

#include <barrier>
#include <thread>

#include <pqxx/pqxx>

#include "admin_support.hpp"
#include "operations/retry_service.hpp"
#include "support/test_host.hpp"

namespace outbox::test {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

const std::string kRetryReason = "handler fixed in release 1.2.3";

class AdminRetry : public AdminApi {
protected:
    static json body(long long version = 4, const std::string& reason = kRetryReason) {
        return {{"expected_version", version}, {"reason", reason}};
    }
    std::string event_state(const std::string& id) const {
        return db_.scalar("SELECT status || '/' || version || '/' || attempt_count FROM event_publication WHERE "
                          "event_id = '" + id + "'");
    }
    long long retries(const std::string& id) const {
        return count("SELECT count(*) FROM outbox_manual_retry WHERE event_id = '" + id + "'");
    }
    long long audits(const std::string& id) const {
        return count("SELECT count(*) FROM audit_event WHERE target_id = '" + id + "'");
    }
    static json error_of(const httplib::Result& res) { return json::parse(res->body)["error"]; }
};

TEST_F(AdminRetry, AcceptedRetryMakesTheEventPendingAndRecordsHistoryAndAudit) {
    const std::string id = review_event(db_);
    db_.exec("UPDATE event_publication SET next_attempt_at = now() + interval '1 day' WHERE event_id = '" + id + "'");
    const auto res = post_retry(id, body(), "incident-42");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 202) << res->body;
    EXPECT_EQ(json::parse(res->body), (json{{"event_id", id}, {"status", "PENDING"}, {"version", 5}}));

    const pqxx::row event = db_.exec(
        "SELECT status, attempt_count, version, next_attempt_at <= now(), lease_owner IS NULL AND lease_token IS NULL "
        "AND lease_expires_at IS NULL FROM event_publication WHERE event_id = '" + id + "'")[0];
    EXPECT_EQ(event[0].as<std::string>(), "PENDING");
    EXPECT_EQ(event[1].as<int>(), 0);
    EXPECT_EQ(event[2].as<long long>(), 5);
    EXPECT_TRUE(event[3].as<bool>()) << "due at once";
    EXPECT_TRUE(event[4].as<bool>());

    const pqxx::row history = db_.exec(
        "SELECT company_id, actor, reason, idempotency_key_hash = encode(sha256('incident-42'::bytea), 'hex'), "
        "length(request_hash), previous_attempt_count, previous_status, previous_version, new_version "
        "FROM outbox_manual_retry WHERE event_id = '" + id + "'")[0];
    EXPECT_EQ(history[0].as<std::string>(), "acme");
    EXPECT_EQ(history[1].as<std::string>(), "alice");
    EXPECT_EQ(history[2].as<std::string>(), kRetryReason);
    EXPECT_TRUE(history[3].as<bool>()) << "the key is stored as its SHA-256, never in clear";
    EXPECT_EQ(history[4].as<int>(), 64);
    EXPECT_EQ(history[5].as<int>(), 3);
    EXPECT_EQ(history[6].as<std::string>(), "REVIEW_REQUIRED");
    EXPECT_EQ(history[7].as<long long>(), 4);
    EXPECT_EQ(history[8].as<long long>(), 5);

    const pqxx::row audit =
        db_.exec("SELECT actor, action, company_id, detail FROM audit_event WHERE target_id = '" + id + "'")[0];
    EXPECT_EQ(audit[0].as<std::string>(), "alice");
    EXPECT_EQ(audit[1].as<std::string>(), "outbox.manual_retry");
    EXPECT_EQ(audit[2].as<std::string>(), "acme");
    const json detail = json::parse(audit[3].as<std::string>());
    EXPECT_EQ(detail["previous_attempt_count"], 3);
    EXPECT_EQ(detail["new_version"], 5);
    EXPECT_EQ(detail["channel"], "api");
    EXPECT_FALSE(audit[3].as<std::string>().find("incident-42") != std::string::npos) << "no key in the audit";
}

TEST_F(AdminRetry, VersionConflictIs409WithTheCurrentVersionAndStatus) {
    const std::string id = review_event(db_);
    const auto res = post_retry(id, body(3), "k");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 409);
    const json error = error_of(res);
    EXPECT_EQ(error["code"], "VERSION_CONFLICT");
    EXPECT_EQ(error["current_version"], 4);
    EXPECT_EQ(error["current_status"], "REVIEW_REQUIRED");
    EXPECT_EQ(event_state(id), "REVIEW_REQUIRED/4/3");
    EXPECT_EQ(retries(id), 0);
}

TEST_F(AdminRetry, AnEventNotInReviewIs409) {
    const std::string id = publish_many(db_.url(), "TestRequested", "{}", 1)[0];
    const auto res = post_retry(id, body(1), "k");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 409);
    const json error = error_of(res);
    EXPECT_EQ(error["code"], "NOT_IN_REVIEW");
    EXPECT_EQ(error["current_status"], "PENDING");
    EXPECT_EQ(error["current_version"], 1);
    EXPECT_EQ(event_state(id), "PENDING/1/0");
}

// The reason is screened like SafePayload's free text; the answer names the rule and never
// echoes the value.
TEST_F(AdminRetry, AReasonShapedLikePersonalDataIs422NamingTheRule) {
    const std::string id = review_event(db_);
    const std::vector<std::pair<std::string, std::string>> cases{
        {"customer jane.doe@example.com asked again", "e-mail"},
        {"called back on +82 10-1234-5678 today", "phone"},
        {"token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl leaked", "JWT"},
        {"the leaked token was eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl.", "JWT"},
        {"account 1234567890123 needs it again", "digit run"}};
    int n = 0;
    for (const auto& [reason, rule] : cases) {
        const auto res = post_retry(id, body(4, reason), "pii-" + std::to_string(++n));
        ASSERT_TRUE(res);
        EXPECT_EQ(res->status, 422) << rule;
        const json error = error_of(res);
        EXPECT_EQ(error["code"], "INVALID_REASON") << rule;
        EXPECT_NE(error["message"].get<std::string>().find(rule), std::string::npos) << error;
        for (const char* secret : {"jane.doe", "1234-5678", "eyJzdWIi", "1234567890123"}) {
            EXPECT_EQ(res->body.find(secret), std::string::npos) << res->body;
        }
    }
    EXPECT_EQ(event_state(id), "REVIEW_REQUIRED/4/3");
    EXPECT_EQ(count("SELECT count(*) FROM outbox_manual_retry"), 0);
}

TEST_F(AdminRetry, ReasonOutsideTenToThreeHundredCharactersIs422) {
    const std::string id = review_event(db_);
    std::string korean;  // 300 three-byte characters: within the limit, counted as characters
    for (int i = 0; i < 300; ++i) korean += "\xEA\xB0\x80";
    struct Case {
        std::string reason;
        int status;
    };
    const std::vector<Case> cases{{"too short", 422},          {std::string(301, 'x'), 422},
                                  {"          ", 422},         {"line one\nline two", 422},
                                  {korean + "\xEA\xB0\x80", 422}};
    int n = 0;
    for (const auto& c : cases) {
        const auto res = post_retry(id, body(4, c.reason), "k" + std::to_string(++n));
        ASSERT_TRUE(res);
        EXPECT_EQ(res->status, c.status) << c.reason.size();
        EXPECT_EQ(error_of(res)["code"], "INVALID_REASON");
    }
    const auto missing = post_retry(id, json{{"expected_version", 4}}, "k-missing");
    ASSERT_TRUE(missing);
    EXPECT_EQ(missing->status, 422);
    EXPECT_EQ(event_state(id), "REVIEW_REQUIRED/4/3");

    const auto longest = post_retry(id, body(4, korean), "k-ok");
    ASSERT_TRUE(longest);
    EXPECT_EQ(longest->status, 202) << longest->body;
    const std::string other = review_event(db_);
    const auto shortest = post_retry(other, body(4, "ten chars!"), "k-ok-2");
    ASSERT_TRUE(shortest);
    EXPECT_EQ(shortest->status, 202) << shortest->body;
}

TEST_F(AdminRetry, MissingIdempotencyKeyIs400) {
    const std::string id = review_event(db_);
    const auto res = post_retry(id, body(), "");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 400);
    EXPECT_EQ(error_of(res)["code"], "MISSING_IDEMPOTENCY_KEY");
    EXPECT_EQ(event_state(id), "REVIEW_REQUIRED/4/3");
}

TEST_F(AdminRetry, MalformedBodiesAre400) {
    const std::string id = review_event(db_);
    const std::string path = "/api/v1/admin/outbox-events/" + id + "/retry";
    httplib::Headers headers = bearer(admin_token());
    headers.emplace("Idempotency-Key", "k");
    for (const std::string text : {"{not json", "[1, 2]", R"({"reason": "handler fixed in 1.2.3"})",
                                   R"({"expected_version": "4", "reason": "handler fixed in 1.2.3"})",
                                   R"({"expected_version": 4.5, "reason": "handler fixed in 1.2.3"})"}) {
        const auto res = client().Post(path.c_str(), headers, text, "application/json");
        ASSERT_TRUE(res);
        EXPECT_EQ(res->status, 400) << text;
        EXPECT_TRUE(error_of(res).contains("code")) << res->body;
    }
    const auto bad_id = post_retry("not-a-uuid", body(), "k");
    ASSERT_TRUE(bad_id);
    EXPECT_EQ(bad_id->status, 400);
    EXPECT_EQ(error_of(bad_id)["code"], "INVALID_EVENT_ID");
    EXPECT_EQ(event_state(id), "REVIEW_REQUIRED/4/3");
}

TEST_F(AdminRetry, TheSameKeyAndRequestReturnsTheFirstResponseWithoutExecutingAgain) {
    const std::string id = review_event(db_);
    const auto first = post_retry(id, body(), "replay-key");
    ASSERT_TRUE(first);
    ASSERT_EQ(first->status, 202);
    // The event moves on (a worker could have failed it again); the replay still answers the first result.
    db_.exec("UPDATE event_publication SET status = 'REVIEW_REQUIRED', attempt_count = 8, version = 9 WHERE event_id = '" +
             id + "'");
    const auto again = post_retry(id, body(), "replay-key");
    ASSERT_TRUE(again);
    EXPECT_EQ(again->status, 202);
    EXPECT_EQ(again->body, first->body);
    EXPECT_EQ(again->get_header_value("Idempotent-Replayed"), "true");
    EXPECT_EQ(event_state(id), "REVIEW_REQUIRED/9/8") << "nothing re-executed";
    EXPECT_EQ(retries(id), 1);
    EXPECT_EQ(audits(id), 1);
}

TEST_F(AdminRetry, TheSameKeyWithAnotherRequestIs422) {
    const std::string id = review_event(db_);
    ASSERT_EQ(post_retry(id, body(), "reused")->status, 202);
    db_.exec("UPDATE event_publication SET status = 'REVIEW_REQUIRED', version = 6 WHERE event_id = '" + id + "'");
    const auto other_reason = post_retry(id, body(6, "another reason, same key"), "reused");
    ASSERT_TRUE(other_reason);
    EXPECT_EQ(other_reason->status, 422);
    EXPECT_EQ(error_of(other_reason)["code"], "IDEMPOTENCY_KEY_REUSED");
    const std::string other_event = review_event(db_);
    const auto other_id = post_retry(other_event, body(), "reused");
    ASSERT_TRUE(other_id);
    EXPECT_EQ(other_id->status, 422);
    EXPECT_EQ(event_state(other_event), "REVIEW_REQUIRED/4/3");
    EXPECT_EQ(count("SELECT count(*) FROM outbox_manual_retry"), 1);

    // Keys are scoped to the company: another company may use the same text.
    const std::string theirs = review_event(db_, "globex");
    const auto res = post_retry(theirs, body(), "reused", admin_token("globex"));
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 202) << res->body;
}

TEST_F(AdminRetry, ConcurrentIdenticalRequestsExecuteExactlyOnce) {
    constexpr int kThreads = 8;
    restart([](admin::AdminOptions& o) {  // every request reaches the database at once
        o.db_connections = kThreads;
        o.db_connections_per_company = kThreads;
    });
    for (int round = 0; round < 5; ++round) {
        const std::string id = review_event(db_);
        const std::string key = "concurrent-" + std::to_string(round);
        std::barrier start(kThreads);
        std::vector<std::pair<int, std::string>> answers(kThreads);
        std::vector<std::thread> threads;
        for (int t = 0; t < kThreads; ++t) {
            threads.emplace_back([&, t] {
                httplib::Client c = client();
                httplib::Headers headers = bearer(admin_token());
                headers.emplace("Idempotency-Key", key);
                start.arrive_and_wait();
                const auto res = c.Post(("/api/v1/admin/outbox-events/" + id + "/retry").c_str(), headers,
                                        body().dump(), "application/json");
                if (res) answers[t] = {res->status, res->body};
            });
        }
        for (auto& thread : threads) thread.join();
        for (const auto& [status, text] : answers) {
            EXPECT_EQ(status, 202) << text;
            EXPECT_EQ(text, answers[0].second);
        }
        EXPECT_EQ(retries(id), 1);
        EXPECT_EQ(audits(id), 1);
        EXPECT_EQ(event_state(id), "PENDING/5/0") << "version bumped once";
    }
}

TEST_F(AdminRetry, ConcurrentRequestsWithOneKeyForTwoEventsExecuteOnlyOne) {
    for (int round = 0; round < 5; ++round) {
        const std::string a = review_event(db_);
        const std::string b = review_event(db_);
        const std::string key = "split-" + std::to_string(round);
        std::barrier start(2);
        int status_a = 0;
        int status_b = 0;
        std::thread ta([&] {
            start.arrive_and_wait();
            status_a = post_retry(a, body(), key)->status;
        });
        std::thread tb([&] {
            start.arrive_and_wait();
            status_b = post_retry(b, body(), key)->status;
        });
        ta.join();
        tb.join();
        EXPECT_EQ(std::min(status_a, status_b), 202);
        EXPECT_EQ(std::max(status_a, status_b), 422) << "the loser learns its key was used for another request";
        EXPECT_EQ(count("SELECT count(*) FROM outbox_manual_retry WHERE event_id IN ('" + a + "', '" + b + "')"), 1);
    }
}

TEST_F(AdminRetry, HistoryAndAuditRowsCannotBeChangedOrDeleted) {
    const std::string id = review_event(db_);
    ASSERT_EQ(post_retry(id, body(), "immutable")->status, 202);
    for (const std::string& sql : std::vector<std::string>{
             "UPDATE outbox_manual_retry SET reason = 'rewritten history' WHERE event_id = '" + id + "'",
          "DELETE FROM outbox_manual_retry WHERE event_id = '" + id + "'",
          "UPDATE audit_event SET actor = 'mallory' WHERE target_id = '" + id + "'",
          "DELETE FROM audit_event WHERE target_id = '" + id + "'", "TRUNCATE outbox_manual_retry",
          "TRUNCATE audit_event"}) {
        try {
            db_.exec(sql);
            ADD_FAILURE() << "the database accepted: " << sql;
        } catch (const pqxx::insufficient_privilege& e) {
            // The immutability trigger's error (libpqxx 6.4 does not carry its SQLSTATE).
            EXPECT_NE(std::string(e.what()).find("append-only"), std::string::npos) << sql;
        }
    }
    EXPECT_EQ(retries(id), 1);
    EXPECT_EQ(audits(id), 1);
    EXPECT_EQ(db_.scalar("SELECT actor FROM audit_event WHERE target_id = '" + id + "'"), "alice");
}

TEST_F(AdminRetry, TheRetriedEventsHandlerRunsAgainAndCompletes) {
    create_scripted_effect_table(db_.url());
    // Fails attempts 1 and 2: with max_attempts 2 it ends in review...
    const std::string id = publish_many(db_.url(), "TestRequested", R"({"fail_times": 2, "db": true})", 1)[0];
    {
        auto options = fast_options(db_.url(), "before-fix");
        options.max_attempts = 2;
        TestHost host(options, {OUTBOX_FIXTURE_SCRIPTED});
        host.start();
        ASSERT_TRUE(wait_until([&] { return event_state(id).starts_with("REVIEW_REQUIRED/"); }, 20s)) << event_state(id);
        host.stop();
    }
    const long long version = std::stoll(db_.scalar("SELECT version FROM event_publication WHERE event_id = '" + id + "'"));
    EXPECT_EQ(count("SELECT attempt_count FROM event_publication WHERE event_id = '" + id + "'"), 2);

    // ...the operator raises max_attempts to 3 (the fix) and re-drives it.
    auto options = fast_options(db_.url(), "after-fix");
    options.max_attempts = 3;
    TestHost host(options, {OUTBOX_FIXTURE_SCRIPTED});
    host.start();
    const auto res = post_retry(id, body(version), "redrive-1");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 202) << res->body;
    ASSERT_TRUE(wait_until([&] { return event_state(id).starts_with("COMPLETED/"); }, 20s)) << event_state(id);
    host.stop();
    EXPECT_EQ(count("SELECT attempt_count FROM event_publication WHERE event_id = '" + id + "'"), 3)
        << "attempts counted again from zero";
    EXPECT_EQ(count("SELECT previous_attempt_count FROM outbox_manual_retry WHERE event_id = '" + id + "'"), 2);
    EXPECT_EQ(count("SELECT count(*) FROM scripted_effect WHERE event_id = '" + id + "'"), 1);
    EXPECT_EQ(count("SELECT attempt FROM scripted_effect WHERE event_id = '" + id + "'"), 3);
    const auto calls = host.metrics().handler_calls();
    EXPECT_EQ(calls.at({"scripted", "retry"}), 2u);
    EXPECT_EQ(calls.at({"scripted", "success"}), 1u);
}

TEST_F(AdminRetry, TheCliPathTakesTheCompanyFromTheEvent) {
    const std::string id = review_event(db_, "globex");
    pqxx::connection conn(db_.url());
    operations::RetryRequest request{id, 4, kRetryReason, "cli-key", "cli:operator", std::nullopt, "cli"};
    const auto first = operations::RetryService(conn).retry(request);
    ASSERT_TRUE(std::holds_alternative<operations::RetryAccepted>(first));
    EXPECT_FALSE(std::get<operations::RetryAccepted>(first).replayed);
    const auto again = operations::RetryService(conn).retry(request);
    ASSERT_TRUE(std::holds_alternative<operations::RetryAccepted>(again));
    EXPECT_TRUE(std::get<operations::RetryAccepted>(again).replayed);
    EXPECT_EQ(db_.scalar("SELECT company_id || ' ' || actor FROM outbox_manual_retry WHERE event_id = '" + id + "'"),
              "globex cli:operator");

    // The API replays the same record for the same company and key.
    const auto api = post_retry(id, body(), "cli-key", admin_token("globex"));
    ASSERT_TRUE(api);
    EXPECT_EQ(api->status, 202);
    EXPECT_EQ(retries(id), 1);

    request.event_id = "0b6f4d1e-8a53-4c1a-9a57-3c8f1a2b7e10";
    const auto unknown = operations::RetryService(conn).retry(request);
    ASSERT_TRUE(std::holds_alternative<operations::RetryRejected>(unknown));
    EXPECT_EQ(std::get<operations::RetryRejected>(unknown).kind, operations::RetryRejected::Kind::NotVisible);
}

}  // namespace
}  // namespace outbox::test
