#pragma once
// Shared by the admin API tests: token minting with libjwt, an in-process AdminServer on
// an ephemeral port against a fresh database, and events forced into REVIEW_REQUIRED.

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "admin/admin_server.hpp"
#include "metrics/metrics.hpp"
#include "support/pg_fixture.hpp"

namespace outbox::test {

inline constexpr const char* kTestSecret = "admin-test-secret-0123456789abcdef";
inline const std::shared_ptr<const routing::HandlerSet> kNoHandlers{};

/// Claims of a valid token: sub, role, company_id, exp in `ttl` (negative: already expired).
nlohmann::json token_claims(const std::string& role, const std::string& company, const std::string& subject = "alice",
                            std::chrono::seconds ttl = std::chrono::minutes{5});

std::string mint_hs256(const nlohmann::json& claims, const std::string& secret = kTestSecret);
std::string mint_rs256(const nlohmann::json& claims, const std::string& private_key_pem);
/// An unsigned token (alg "none").
std::string mint_unsigned(const nlohmann::json& claims);

struct RsaKeyPair {
    std::string private_pem;
    std::string public_pem;
};
/// A fresh 2048-bit key pair made with the openssl command-line tool.
RsaKeyPair generate_rsa_key_pair();

/// Publishes one event for `company` and moves it to REVIEW_REQUIRED as a worker would
/// (attempt_count 3, code HTTP_422, version 4). Returns its id.
std::string review_event(const TestDatabase& db, const std::string& company = "acme",
                         const std::string& event_type = "TestRequested", const std::string& payload = "{}");

/// A fixture with a fresh database and an AdminServer on 127.0.0.1 (ephemeral port)
/// configured with kTestSecret.
class AdminApi : public ::testing::Test {
protected:
    void SetUp() override;
    void TearDown() override;

    /// Restarts the server with changed options.
    void restart(const std::function<void(admin::AdminOptions&)>& change);
    [[nodiscard]] admin::AdminOptions default_options() const;

    [[nodiscard]] httplib::Client client() const;
    static httplib::Headers bearer(const std::string& token);
    /// POST .../{id}/retry with an ADMIN token of `company` (or `token` when given).
    httplib::Result post_retry(const std::string& id, const nlohmann::json& body, const std::string& key,
                               const std::string& token = {});
    [[nodiscard]] std::string admin_token(const std::string& company = "acme") const;
    long long count(const std::string& sql) const { return std::stoll(db_.scalar(sql)); }

    TestDatabase db_;
    metrics::Metrics metrics_;
    std::unique_ptr<admin::AdminServer> server_;
};

}  // namespace outbox::test
