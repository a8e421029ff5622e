// POST /api/v1/admin/outbox-events/{id}/discard: a REVIEW_REQUIRED, PENDING or RETRY_WAIT
// event becomes DISCARDED, audited like a retry, with the same version checks, idempotency
// and tenant rules; .../{id}/cancel does the same for a PENDING or RETRY_WAIT event only.
#include <gtest/gtest.h>

#include <pqxx/pqxx>

#include "admin_support.hpp"
#include "support/test_host.hpp"

namespace outbox::test {
namespace {

using nlohmann::json;

const std::string kDiscardReason = "customer account closed, INC-7";

class AdminDiscard : public AdminApi {
protected:
    httplib::Result post_discard(const std::string& id, const json& body, const std::string& key,
                                 const std::string& token = {}, const std::string& action = "discard") {
        httplib::Headers headers = bearer(token.empty() ? admin_token() : token);
        if (!key.empty()) headers.emplace("Idempotency-Key", key);
        return client().Post(("/api/v1/admin/outbox-events/" + id + "/" + action).c_str(), headers, body.dump(),
                             "application/json");
    }
    httplib::Result post_cancel(const std::string& id, const json& body, const std::string& key) {
        return post_discard(id, body, key, {}, "cancel");
    }
    /// A PENDING event of acme at version 1 that a host has claimed: PROCESSING, leased.
    std::string processing_event() const {
        const std::string id = publish_many(db_.url(), "TestRequested", "{}", 1)[0];
        db_.exec("UPDATE event_publication SET status = 'PROCESSING', attempt_count = 1, lease_owner = 'h1', "
                 "lease_token = gen_random_uuid(), lease_expires_at = now() + interval '1 hour' WHERE event_id = '" +
                 id + "'");
        return id;
    }
    static json body(long long version = 4, const std::string& reason = kDiscardReason) {
        return {{"expected_version", version}, {"reason", reason}};
    }
    std::string event_state(const std::string& id) const {
        return db_.scalar("SELECT status || '/' || version || '/' || (completed_at IS NOT NULL) FROM event_publication "
                          "WHERE event_id = '" + id + "'");
    }
    long long discards(const std::string& id) const {
        return count("SELECT count(*) FROM outbox_discard WHERE event_id = '" + id + "'");
    }
    static json error_of(const httplib::Result& res) { return json::parse(res->body)["error"]; }
};

TEST_F(AdminDiscard, AcceptedDiscardMakesTheEventDiscardedAndRecordsHistoryAuditAndMetric) {
    const std::string id = review_event(db_);
    const auto res = post_discard(id, body(), "incident-7");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 202) << res->body;
    EXPECT_EQ(json::parse(res->body), (json{{"event_id", id}, {"status", "DISCARDED"}, {"version", 5}}));
    EXPECT_EQ(event_state(id), "DISCARDED/5/true");

    const pqxx::row history = db_.exec(
        "SELECT company_id, actor, reason, idempotency_key_hash = encode(sha256('incident-7'::bytea), 'hex'), "
        "previous_attempt_count, previous_status, previous_version, new_version FROM outbox_discard WHERE event_id = '" +
        id + "'")[0];
    EXPECT_EQ(history[0].as<std::string>(), "acme");
    EXPECT_EQ(history[1].as<std::string>(), "alice");
    EXPECT_EQ(history[2].as<std::string>(), kDiscardReason);
    EXPECT_TRUE(history[3].as<bool>()) << "the key is stored as its SHA-256";
    EXPECT_EQ(history[4].as<int>(), 3);
    EXPECT_EQ(history[5].as<std::string>(), "REVIEW_REQUIRED");
    EXPECT_EQ(history[6].as<long long>(), 4);
    EXPECT_EQ(history[7].as<long long>(), 5);
    const pqxx::row audit = db_.exec("SELECT actor, action, company_id, detail FROM audit_event WHERE target_id = '" +
                                     id + "'")[0];
    EXPECT_EQ(audit[0].as<std::string>(), "alice");
    EXPECT_EQ(audit[1].as<std::string>(), "outbox.discard");
    EXPECT_EQ(audit[2].as<std::string>(), "acme");
    EXPECT_EQ(json::parse(audit[3].as<std::string>())["new_version"], 5);
    EXPECT_EQ(metrics_.outcome_count(metrics::Metrics::Outcome::Discarded), 1u);

    EXPECT_THROW(db_.exec("DELETE FROM outbox_discard"), std::exception) << "the record is append-only";
}

TEST_F(AdminDiscard, TheSameKeyAndRequestReplaysTheFirstAnswerAndADifferentRequestIs422) {
    const std::string id = review_event(db_);
    const auto first = post_discard(id, body(), "k-1");
    ASSERT_TRUE(first);
    ASSERT_EQ(first->status, 202);
    const auto again = post_discard(id, body(), "k-1");
    ASSERT_TRUE(again);
    EXPECT_EQ(again->status, 202);
    EXPECT_EQ(again->body, first->body);
    EXPECT_EQ(again->get_header_value("Idempotent-Replayed"), "true");
    EXPECT_EQ(discards(id), 1);
    EXPECT_EQ(metrics_.outcome_count(metrics::Metrics::Outcome::Discarded), 1u) << "a replay discards nothing";

    const auto other = post_discard(id, body(4, "another reason entirely"), "k-1");
    ASSERT_TRUE(other);
    EXPECT_EQ(other->status, 422);
    EXPECT_EQ(error_of(other)["code"], "IDEMPOTENCY_KEY_REUSED");
}

TEST_F(AdminDiscard, OnlyAWaitingOrReviewedEventAtTheExpectedVersionIsDiscardedNeverAProcessingOne) {
    const std::string id = review_event(db_);
    const auto stale = post_discard(id, body(3), "k-stale");
    ASSERT_TRUE(stale);
    EXPECT_EQ(stale->status, 409);
    EXPECT_EQ(error_of(stale)["code"], "VERSION_CONFLICT");
    EXPECT_EQ(error_of(stale)["current_version"], 4);

    const std::string running = processing_event();
    const auto processing = post_discard(running, body(1), "k-processing");
    ASSERT_TRUE(processing);
    EXPECT_EQ(processing->status, 409) << "a handler may be running it";
    EXPECT_EQ(error_of(processing)["code"], "NOT_IN_REVIEW");
    EXPECT_EQ(error_of(processing)["current_status"], "PROCESSING");
    EXPECT_EQ(event_state(running), "PROCESSING/1/false");

    const std::string pending = publish_many(db_.url(), "TestRequested", "{}", 1)[0];
    const auto waiting = post_discard(pending, body(1), "k-pending");
    ASSERT_TRUE(waiting);
    EXPECT_EQ(waiting->status, 202) << waiting->body;
    EXPECT_EQ(event_state(pending), "DISCARDED/2/true");
    const std::string retry_wait = publish_many(db_.url(), "TestRequested", "{}", 1)[0];
    db_.exec("UPDATE event_publication SET status = 'RETRY_WAIT', attempt_count = 1, version = 2, "
             "next_attempt_at = now() + interval '1 day' WHERE event_id = '" + retry_wait + "'");
    ASSERT_EQ(post_discard(retry_wait, body(2), "k-retry-wait")->status, 202);
    EXPECT_EQ(event_state(retry_wait), "DISCARDED/3/true");
    EXPECT_EQ(count("SELECT count(*) FROM outbox_discard WHERE previous_status IN ('PENDING', 'RETRY_WAIT')"), 2);

    ASSERT_EQ(post_discard(id, body(), "k-ok")->status, 202);
    const auto twice = post_discard(id, body(5), "k-twice");
    ASSERT_TRUE(twice);
    EXPECT_EQ(twice->status, 409) << "a DISCARDED event is terminal";
    EXPECT_EQ(error_of(twice)["current_status"], "DISCARDED");
}

TEST_F(AdminDiscard, CancelDiscardsOnlyAWaitingEventWithTheSameRecordAndAudit) {
    const std::string pending = publish_many(db_.url(), "TestRequested", "{}", 1)[0];
    const auto res = post_cancel(pending, body(1), "c-1");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 202) << res->body;
    EXPECT_EQ(json::parse(res->body), (json{{"event_id", pending}, {"status", "DISCARDED"}, {"version", 2}}));
    EXPECT_EQ(event_state(pending), "DISCARDED/2/true");
    EXPECT_EQ(discards(pending), 1);
    EXPECT_EQ(db_.scalar("SELECT action FROM audit_event WHERE target_id = '" + pending + "'"), "outbox.cancel");
    EXPECT_EQ(metrics_.outcome_count(metrics::Metrics::Outcome::Discarded), 1u);
    EXPECT_EQ(post_cancel(pending, body(1), "c-1")->get_header_value("Idempotent-Replayed"), "true");
    const auto as_discard = post_discard(pending, body(1), "c-1");
    ASSERT_TRUE(as_discard);
    EXPECT_EQ(as_discard->status, 422) << "a cancel's key is taken for a discard of the same event";

    const std::string reviewed = review_event(db_);
    const auto review = post_cancel(reviewed, body(), "c-review");
    ASSERT_TRUE(review);
    EXPECT_EQ(review->status, 409) << "a reviewed event is discarded, not cancelled";
    EXPECT_EQ(error_of(review)["current_status"], "REVIEW_REQUIRED");
    const std::string running = processing_event();
    const auto processing = post_cancel(running, body(1), "c-processing");
    ASSERT_TRUE(processing);
    EXPECT_EQ(processing->status, 409);
    EXPECT_EQ(error_of(processing)["current_status"], "PROCESSING");
    EXPECT_EQ(event_state(reviewed), "REVIEW_REQUIRED/4/false");
    EXPECT_EQ(event_state(running), "PROCESSING/1/false");
}

TEST_F(AdminDiscard, OtherRolesOtherCompaniesAndBadRequestsAreRefused) {
    const std::string id = review_event(db_);
    const auto hr = post_discard(id, body(), "k-hr", mint_hs256(token_claims("HR", "acme")));
    ASSERT_TRUE(hr);
    EXPECT_EQ(hr->status, 403);
    const auto other_company = post_discard(id, body(), "k-other", admin_token("globex"));
    ASSERT_TRUE(other_company);
    EXPECT_EQ(other_company->status, 403);
    EXPECT_EQ(error_of(other_company)["code"], "EVENT_NOT_ACCESSIBLE");
    const auto no_key = post_discard(id, body(), "");
    ASSERT_TRUE(no_key);
    EXPECT_EQ(no_key->status, 400);
    EXPECT_EQ(error_of(no_key)["code"], "MISSING_IDEMPOTENCY_KEY");
    const auto short_reason = post_discard(id, body(4, "too short"), "k-short");
    ASSERT_TRUE(short_reason);
    EXPECT_EQ(short_reason->status, 422);
    EXPECT_EQ(error_of(short_reason)["code"], "INVALID_REASON");
    EXPECT_EQ(event_state(id), "REVIEW_REQUIRED/4/false");
    EXPECT_EQ(discards(id), 0);
}

}  // namespace
}  // namespace outbox::test
