// POST /api/v1/admin/outbox-events/retry (bulk re-drive) and
// POST /api/v1/admin/handlers/{name}/pause|resume over HTTP: roles, tenant isolation,
// idempotent replays and the answers' shapes (the services behind them are tested in
// bulk_retry_test.cpp and handler_pause_test.cpp).
#include <gtest/gtest.h>

#include "admin_support.hpp"

namespace outbox::test {
namespace {

using nlohmann::json;

const std::string kOperatorReason = "remote fixed after incident 42";

class AdminOperator : public AdminApi {
protected:
    httplib::Result post(const std::string& path, const json& body, const std::string& token,
                         const std::string& key = {}) {
        auto headers = bearer(token);
        if (!key.empty()) headers.emplace("Idempotency-Key", key);
        return client().Post(path, headers, body.dump(), "application/json");
    }
    httplib::Result bulk(const json& body, const std::string& key, const std::string& token) {
        return post("/api/v1/admin/outbox-events/retry", body, token, key);
    }
    static json body(const json& filter = {{"last_error_code", "HTTP_422"}}, const std::string& reason = kOperatorReason) {
        return {{"filter", filter}, {"reason", reason}};
    }
    std::string token(const std::string& role, const std::string& company = "acme") const {
        return mint_hs256(token_claims(role, company));
    }
    std::string state(const std::string& id) const {
        return db_.scalar("SELECT status || '/' || version FROM event_publication WHERE event_id = '" + id + "'");
    }
    static std::string code_of(const httplib::Result& res) { return json::parse(res->body)["error"]["code"]; }
};

TEST_F(AdminOperator, BulkRetryRedrivesOnlyTheCallersCompanyAndReplays) {
    const auto a1 = review_event(db_, "acme");
    const auto a2 = review_event(db_, "acme");
    const auto g1 = review_event(db_, "globex");
    auto res = bulk(body(), "bulk-1", admin_token());
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 202) << res->body;
    const json answer = json::parse(res->body);
    EXPECT_EQ(answer["count"], 2);
    std::vector<std::string> ids = answer["event_ids"];
    std::sort(ids.begin(), ids.end());
    std::vector<std::string> expected{a1, a2};
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(ids, expected);
    EXPECT_EQ(state(a1), "PENDING/5");
    EXPECT_EQ(state(g1), "REVIEW_REQUIRED/4") << "another company's event is neither re-driven nor counted";
    EXPECT_EQ(count("SELECT count(*) FROM outbox_manual_retry"), 2);
    EXPECT_EQ(count("SELECT count(*) FROM audit_event WHERE action = 'outbox.manual_retry'"), 2);

    res = bulk(body(), "bulk-1", admin_token());
    ASSERT_EQ(res->status, 202) << res->body;
    EXPECT_EQ(json::parse(res->body), answer);
    EXPECT_EQ(res->get_header_value("Idempotent-Replayed"), "true");
    res = bulk(body({{"last_error_code", "HTTP_422"}}, "a different reason here"), "bulk-1", admin_token());
    EXPECT_EQ(res->status, 422);
    EXPECT_EQ(code_of(res), "IDEMPOTENCY_KEY_REUSED");
    EXPECT_EQ(count("SELECT count(*) FROM outbox_manual_retry"), 2);
}

TEST_F(AdminOperator, BulkRetryRefusesOtherRolesAndBadRequests) {
    const auto a1 = review_event(db_, "acme");
    for (const char* role : {"HR", "VIEWER", "PLATFORM_ADMIN"}) {
        const auto res = bulk(body(), "r-1", token(role));
        ASSERT_TRUE(res);
        EXPECT_EQ(res->status, 403) << role;
    }
    auto res = bulk(body(), "", admin_token());
    EXPECT_EQ(res->status, 400);
    EXPECT_EQ(code_of(res), "MISSING_IDEMPOTENCY_KEY");
    res = client().Post("/api/v1/admin/outbox-events/retry", {{"Authorization", "Bearer " + admin_token()}, {"Idempotency-Key", "r-2"}},
                        "{not json", "application/json");
    EXPECT_EQ(res->status, 400);
    res = bulk({{"reason", kOperatorReason}}, "r-3", admin_token());
    EXPECT_EQ(res->status, 400);
    EXPECT_EQ(code_of(res), "INVALID_FILTER");
    res = bulk(body({{"last_error_code", "HTTP_422"}, {"status", "COMPLETED"}}), "r-4", admin_token());
    EXPECT_EQ(res->status, 400);
    res = bulk(body({{"last_error_code", "HTTP_422"}, {"limit", 1001}}), "r-5", admin_token());
    EXPECT_EQ(res->status, 422);
    EXPECT_EQ(code_of(res), "INVALID_LIMIT");
    res = bulk(body(json::object()), "r-6", admin_token());
    EXPECT_EQ(res->status, 422);
    EXPECT_EQ(code_of(res), "INVALID_FILTER");
    res = bulk(body({{"last_error_code", "HTTP_422"}}, "short"), "r-7", admin_token());
    EXPECT_EQ(res->status, 422);
    EXPECT_EQ(code_of(res), "INVALID_REASON");
    EXPECT_EQ(state(a1), "REVIEW_REQUIRED/4");
}

TEST_F(AdminOperator, NoCodeGroupRedriveTakesOnlyEventsWithoutACode) {
    // The coded event is the oldest: a filter that ignored the code would take it first.
    const auto coded = review_event(db_, "acme");
    const auto n1 = review_event(db_, "acme");
    const auto n2 = review_event(db_, "acme");
    const auto theirs = review_event(db_, "globex");
    db_.exec("UPDATE event_publication SET last_error_code = NULL WHERE event_id IN ('" + n1 + "', '" + n2 + "', '" +
             theirs + "')");

    // What the console's "Re-drive the whole group" sends for a "(no code)" group of 2.
    auto res = bulk(body({{"event_type", "TestRequested"}, {"no_error_code", true}, {"limit", 2}}), "none-1", admin_token());
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 202) << res->body;
    std::vector<std::string> ids = json::parse(res->body)["event_ids"];
    std::sort(ids.begin(), ids.end());
    std::vector<std::string> expected{n1, n2};
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(ids, expected);
    EXPECT_EQ(state(coded), "REVIEW_REQUIRED/4") << "an event with a code belongs to another group";
    EXPECT_EQ(state(theirs), "REVIEW_REQUIRED/4");
    EXPECT_EQ(db_.scalar("SELECT filter ->> 'no_error_code' FROM outbox_bulk_retry"), "true");
}

TEST_F(AdminOperator, NullErrorCodeIsRefusedInsteadOfMeaningAny) {
    const auto coded = review_event(db_, "acme");
    const auto uncoded = review_event(db_, "acme");
    db_.exec("UPDATE event_publication SET last_error_code = NULL WHERE event_id = '" + uncoded + "'");
    auto res = bulk(body({{"event_type", "TestRequested"}, {"last_error_code", nullptr}}), "null-1", admin_token());
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 422) << res->body;
    EXPECT_EQ(code_of(res), "INVALID_FILTER");
    res = bulk(body({{"last_error_code", "HTTP_422"}, {"no_error_code", true}}), "null-2", admin_token());
    EXPECT_EQ(res->status, 422) << res->body;
    EXPECT_EQ(code_of(res), "INVALID_FILTER");
    res = bulk(body({{"event_type", "TestRequested"}, {"no_error_code", "yes"}}), "null-3", admin_token());
    EXPECT_EQ(res->status, 400) << res->body;
    EXPECT_EQ(code_of(res), "INVALID_FILTER");
    EXPECT_EQ(state(coded), "REVIEW_REQUIRED/4");
    EXPECT_EQ(state(uncoded), "REVIEW_REQUIRED/4");
    EXPECT_EQ(count("SELECT count(*) FROM outbox_bulk_retry"), 0);
}

TEST_F(AdminOperator, PauseAndResumeNeedAPlatformRoleAndAreIdempotent) {
    // Each scrape below must see the state it follows, not admin.metrics_cache's reuse.
    restart([](admin::AdminOptions& options) { options.metrics_cache = std::chrono::milliseconds{0}; });
    for (const char* role : {"ADMIN", "HR", "VIEWER"}) {
        const auto res = post("/api/v1/admin/handlers/mission-log-forwarding/pause", json::object(), token(role));
        ASSERT_TRUE(res);
        EXPECT_EQ(res->status, 403) << role;
    }
    EXPECT_EQ(count("SELECT count(*) FROM outbox_handler_pause"), 0);
    auto res = post("/api/v1/admin/handlers/mission-log-forwarding/pause", json::object(), token("PLATFORM_ADMIN"));
    ASSERT_EQ(res->status, 200) << res->body;
    EXPECT_EQ(json::parse(res->body), (json{{"handler", "mission-log-forwarding"}, {"paused", true}, {"changed", true}}));
    res = post("/api/v1/admin/handlers/mission-log-forwarding/pause", json::object(), token("PLATFORM_ADMIN"));
    ASSERT_EQ(res->status, 200) << res->body;
    EXPECT_EQ(json::parse(res->body)["changed"], false);
    EXPECT_EQ(db_.scalar("SELECT paused_by FROM outbox_handler_pause WHERE handler_name = 'mission-log-forwarding'"),
              "alice");
    EXPECT_EQ(count("SELECT count(*) FROM audit_event WHERE action = 'outbox.handler_paused'"), 1);
    const auto metrics = client().Get("/metrics");
    ASSERT_TRUE(metrics);
    EXPECT_NE(metrics->body.find("outbox_handler_paused{handler=\"mission-log-forwarding\"} 1\n"), std::string::npos)
        << metrics->body;
    res = post("/api/v1/admin/handlers/Bad%20Name/pause", json::object(), token("PLATFORM_ADMIN"));
    EXPECT_EQ(res->status, 400);
    res = post("/api/v1/admin/handlers/mission-log-forwarding/resume", json::object(), token("PLATFORM_ADMIN"));
    ASSERT_EQ(res->status, 200) << res->body;
    EXPECT_EQ(json::parse(res->body), (json{{"handler", "mission-log-forwarding"}, {"paused", false}, {"changed", true}}));
    EXPECT_EQ(count("SELECT count(*) FROM outbox_handler_pause"), 0);
    EXPECT_EQ(client().Get("/metrics")->body.find("outbox_handler_paused{handler=\"mission-log-forwarding\"} 1"),
              std::string::npos);
}

TEST_F(AdminOperator, AnOpenCircuitBreakerShowsInMetricsAndTheFleetAndAnOperatorCanTakeItsPauseOver) {
    restart([](admin::AdminOptions& options) { options.metrics_cache = std::chrono::milliseconds{0}; });
    // The pause a host writes when the breaker opens.
    db_.exec("INSERT INTO outbox_handler_pause (handler_name, paused_by, probe_after) "
             "VALUES ('mission-log-forwarding', 'circuit-breaker', now() + interval '30 seconds')");
    auto metrics = client().Get("/metrics");
    ASSERT_TRUE(metrics);
    EXPECT_NE(metrics->body.find("# TYPE outbox_circuit_open gauge\n"), std::string::npos) << metrics->body;
    EXPECT_NE(metrics->body.find("outbox_circuit_open{handler=\"mission-log-forwarding\"} 1\n"), std::string::npos)
        << metrics->body;
    const json fleet = json::parse(client().Get("/api/v1/admin/fleet", bearer(token("PLATFORM_ADMIN")))->body);
    ASSERT_EQ(fleet["paused"].size(), 1u) << fleet;
    EXPECT_EQ(fleet["paused"][0]["paused_by"], "circuit-breaker");
    EXPECT_EQ(fleet["paused"][0]["circuit_open"], true);
    EXPECT_TRUE(fleet["paused"][0].contains("next_probe_at")) << fleet;

    // An operator pauses it: the pause becomes theirs and the breaker is closed as such.
    auto res = post("/api/v1/admin/handlers/mission-log-forwarding/pause", json::object(), token("PLATFORM_ADMIN"));
    ASSERT_EQ(res->status, 200) << res->body;
    EXPECT_EQ(json::parse(res->body)["changed"], true) << "the pause changed hands";
    EXPECT_EQ(db_.scalar("SELECT paused_by || '/' || (probe_after IS NULL) FROM outbox_handler_pause"), "alice/true");
    metrics = client().Get("/metrics");
    EXPECT_EQ(metrics->body.find("outbox_circuit_open{handler=\"mission-log-forwarding\"} 1"), std::string::npos)
        << metrics->body;
    EXPECT_NE(metrics->body.find("outbox_handler_paused{handler=\"mission-log-forwarding\"} 1\n"), std::string::npos);
    const json manual = json::parse(client().Get("/api/v1/admin/fleet", bearer(token("PLATFORM_ADMIN")))->body);
    EXPECT_EQ(manual["paused"][0]["circuit_open"], false) << manual;
    EXPECT_FALSE(manual["paused"][0].contains("next_probe_at")) << manual;

    // A token whose sub reads "circuit-breaker" still makes an operator's pause.
    res = post("/api/v1/admin/handlers/mission-log-forwarding/resume", json::object(), token("PLATFORM_ADMIN"));
    ASSERT_EQ(res->status, 200) << res->body;
    res = post("/api/v1/admin/handlers/mission-log-forwarding/pause", json::object(),
               mint_hs256(token_claims("PLATFORM_ADMIN", "acme", "circuit-breaker")));
    ASSERT_EQ(res->status, 200) << res->body;
    EXPECT_EQ(db_.scalar("SELECT paused_by FROM outbox_handler_pause"), "operator:circuit-breaker");
}

}  // namespace
}  // namespace outbox::test
