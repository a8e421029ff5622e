// Who may call the admin API: a real AdminServer on 127.0.0.1, real tokens, a real database.
#include <gtest/gtest.h>

#include "admin_support.hpp"

namespace outbox::test {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

class AdminAuth : public AdminApi {
protected:
    std::string event_state(const std::string& id) const {
        return db_.scalar("SELECT status || '/' || version || '/' || attempt_count FROM event_publication WHERE "
                          "event_id = '" + id + "'");
    }
    static json body() { return {{"expected_version", 4}, {"reason", "handler fixed in release 1.2.3"}}; }
};

TEST_F(AdminAuth, RetryAuthorizationMatrix) {
    restart([](admin::AdminOptions& o) { o.jwt.audience = "outboxd-admin"; });
    auto with_aud = [](json claims) {
        claims["aud"] = "outboxd-admin";
        return claims;
    };
    auto without_iat = [](json claims) {
        claims.erase("iat");
        return claims;
    };
    struct Case {
        const char* name;
        std::optional<std::string> token;  // nullopt: no Authorization header
        int status;
        const char* code;
    };
    const std::vector<Case> cases{
        {"no token", std::nullopt, 401, "UNAUTHENTICATED"},
        {"bad signature", mint_hs256(with_aud(token_claims("ADMIN", "acme")), "another-secret"), 401, "INVALID_TOKEN"},
        {"expired", mint_hs256(with_aud(token_claims("ADMIN", "acme", "alice", -10min))), 401, "INVALID_TOKEN"},
        {"no iat", mint_hs256(with_aud(without_iat(token_claims("ADMIN", "acme")))), 401, "INVALID_TOKEN"},
        {"lifetime over admin.jwt_max_lifetime", mint_hs256(with_aud(token_claims("ADMIN", "acme", "alice", 2h))), 401,
         "INVALID_TOKEN"},
        {"wrong audience", mint_hs256(token_claims("ADMIN", "acme")), 401, "INVALID_TOKEN"},
        {"HR", mint_hs256(with_aud(token_claims("HR", "acme"))), 403, "FORBIDDEN"},
        {"VIEWER", mint_hs256(with_aud(token_claims("VIEWER", "acme"))), 403, "FORBIDDEN"},
        {"other company's ADMIN", mint_hs256(with_aud(token_claims("ADMIN", "globex"))), 403, "EVENT_NOT_ACCESSIBLE"},
        {"right ADMIN", mint_hs256(with_aud(token_claims("ADMIN", "acme"))), 202, nullptr},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.name);
        const std::string id = review_event(db_);
        httplib::Headers headers{{"Idempotency-Key", std::string("key-") + c.name}};
        if (c.token) headers.emplace("Authorization", "Bearer " + *c.token);
        const auto res = client().Post(("/api/v1/admin/outbox-events/" + id + "/retry").c_str(), headers,
                                       body().dump(), "application/json");
        ASSERT_TRUE(res);
        EXPECT_EQ(res->status, c.status) << res->body;
        const json answer = json::parse(res->body);
        if (c.code != nullptr) {
            EXPECT_EQ(answer["error"]["code"], c.code) << res->body;
            EXPECT_EQ(event_state(id), "REVIEW_REQUIRED/4/3") << "a refused request changes nothing";
            EXPECT_EQ(count("SELECT count(*) FROM outbox_manual_retry WHERE event_id = '" + id + "'"), 0);
        } else {
            EXPECT_EQ(answer["status"], "PENDING");
            EXPECT_EQ(event_state(id), "PENDING/5/0");
        }
        if (c.status == 401) {
            EXPECT_EQ(res->get_header_value("WWW-Authenticate"), "Bearer");
        }
    }
}

TEST_F(AdminAuth, AnotherCompanysEventAndAnUnknownIdGetTheSameAnswer) {
    const std::string theirs = review_event(db_, "globex");
    const std::string unknown = "0b6f4d1e-8a53-4c1a-9a57-3c8f1a2b7e10";
    const auto retry_theirs = post_retry(theirs, body(), "k1");
    const auto retry_unknown = post_retry(unknown, body(), "k2");
    ASSERT_TRUE(retry_theirs && retry_unknown);
    EXPECT_EQ(retry_theirs->status, 403);
    EXPECT_EQ(retry_unknown->status, retry_theirs->status);
    EXPECT_EQ(retry_unknown->body, retry_theirs->body) << "the answer must not reveal that the id exists elsewhere";

    const auto get_theirs = client().Get(("/api/v1/admin/outbox-events/" + theirs).c_str(), bearer(admin_token()));
    const auto get_unknown = client().Get(("/api/v1/admin/outbox-events/" + unknown).c_str(), bearer(admin_token()));
    ASSERT_TRUE(get_theirs && get_unknown);
    EXPECT_EQ(get_theirs->status, 403);
    EXPECT_EQ(get_unknown->status, 403);
    EXPECT_EQ(get_unknown->body, get_theirs->body);
    EXPECT_EQ(event_state(theirs), "REVIEW_REQUIRED/4/3");
}

TEST_F(AdminAuth, HrAndViewerMayReadTheirCompanysEvents) {
    const std::string id = review_event(db_);
    for (const char* role : {"ADMIN", "HR", "VIEWER"}) {
        SCOPED_TRACE(role);
        const auto token = mint_hs256(token_claims(role, "acme"));
        const auto one = client().Get(("/api/v1/admin/outbox-events/" + id).c_str(), bearer(token));
        ASSERT_TRUE(one);
        EXPECT_EQ(one->status, 200) << one->body;
        const auto list = client().Get("/api/v1/admin/outbox-events", bearer(token));
        ASSERT_TRUE(list);
        EXPECT_EQ(list->status, 200) << list->body;
    }
    const auto other = client().Get(("/api/v1/admin/outbox-events/" + id).c_str(),
                                    bearer(mint_hs256(token_claims("VIEWER", "globex"))));
    ASSERT_TRUE(other);
    EXPECT_EQ(other->status, 403);
}

TEST_F(AdminAuth, AnUnknownRoleIsForbiddenEverywhere) {
    const std::string id = review_event(db_);
    const auto token = mint_hs256(token_claims("SUPERUSER", "acme"));
    const auto read = client().Get(("/api/v1/admin/outbox-events/" + id).c_str(), bearer(token));
    const auto retry = post_retry(id, body(), "k", token);
    ASSERT_TRUE(read && retry);
    EXPECT_EQ(read->status, 403);
    EXPECT_EQ(retry->status, 403);
    EXPECT_EQ(read->body.find("SUPERUSER"), std::string::npos) << "a 403 never echoes the role claim: " << read->body;
    EXPECT_EQ(retry->body.find("SUPERUSER"), std::string::npos) << retry->body;
}

TEST_F(AdminAuth, MalformedAuthorizationHeadersAre401) {
    for (const std::string header : {"Basic YWxpY2U6c2VjcmV0", "Bearer", "Bearer not-a-jwt", "Bearer a.b.c"}) {
        SCOPED_TRACE(header);
        const auto res = client().Get("/api/v1/admin/outbox-events", {{"Authorization", header}});
        ASSERT_TRUE(res);
        EXPECT_EQ(res->status, 401);
        EXPECT_TRUE(json::parse(res->body)["error"].contains("message"));
    }
}

TEST_F(AdminAuth, UnsignedAndAlgorithmConfusedTokensAreRefused) {
    const RsaKeyPair keys = generate_rsa_key_pair();
    restart([&](admin::AdminOptions& o) {
        o.jwt.hs256_secret.clear();
        o.jwt.rs256_public_key_pem = keys.public_pem;
    });
    const auto claims = token_claims("ADMIN", "acme");
    const auto none = client().Get("/api/v1/admin/outbox-events", bearer(mint_unsigned(claims)));
    // HS256 "signed" with the public key, which an attacker knows.
    const auto confused = client().Get("/api/v1/admin/outbox-events", bearer(mint_hs256(claims, keys.public_pem)));
    const auto good = client().Get("/api/v1/admin/outbox-events", bearer(mint_rs256(claims, keys.private_pem)));
    ASSERT_TRUE(none && confused && good);
    EXPECT_EQ(none->status, 401) << none->body;
    EXPECT_EQ(confused->status, 401) << confused->body;
    EXPECT_EQ(good->status, 200) << good->body;
}

TEST_F(AdminAuth, WithoutAConfiguredKeyTheApiSays401ButProbesAndMetricsAreServed) {
    restart([](admin::AdminOptions& o) { o.jwt.hs256_secret.clear(); });
    const auto res = client().Get("/api/v1/admin/outbox-events", bearer(admin_token()));
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 401);
    const json error = json::parse(res->body)["error"];
    EXPECT_EQ(error["code"], "AUTH_NOT_CONFIGURED");
    EXPECT_NE(error["message"].get<std::string>().find("OUTBOX_ADMIN_JWT_SECRET"), std::string::npos);
    for (const char* path : {"/metrics", "/healthz", "/readyz"}) {
        const auto probe = client().Get(path);
        ASSERT_TRUE(probe) << path;
        EXPECT_EQ(probe->status, 200) << path << ": " << probe->body;
    }
}

TEST_F(AdminAuth, ATokenWithoutCompanyIs401) {
    json claims = token_claims("ADMIN", "acme");
    claims.erase("company_id");
    const auto res = client().Get("/api/v1/admin/outbox-events", bearer(mint_hs256(claims)));
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 401);
}

}  // namespace
}  // namespace outbox::test
