// The fleet read endpoint and fleet gauges of /metrics.
#include <gtest/gtest.h>

#include "integration/admin_support.hpp"

namespace outbox::test {
namespace {

using json = nlohmann::json;

class AdminFleet : public AdminApi {
protected:
    void SetUp() override {
        AdminApi::SetUp();
        // Two live hosts that disagree about OrderPlaced, and one gone host.
        db_.exec(R"SQL(
INSERT INTO outbox_host (host_id, version, started_at, last_heartbeat_at, heartbeat_interval_ms, enabled, handlers) VALUES
 ('host-a', '0.1.0', now(), now(), 60000, true,
  '[{"handler": "mailer", "event_types": ["OrderPlaced"], "file": "libmailer.so", "abi": "1.0"},
    {"handler": "audit", "event_types": ["OrderPlaced"], "file": "libaudit.so", "abi": "1.0"}]'),
 ('host-b', '0.1.0', now(), now(), 60000, true,
  '[{"handler": "mailer", "event_types": ["OrderPlaced"], "file": "libmailer.so", "abi": "1.0"}]'),
 ('host-c', '0.1.0', now() - interval '1 hour', now() - interval '10 minutes', 5000, true, '[]'))SQL");
    }
};

TEST_F(AdminFleet, ShowsHostsTheirHandlersAndMismatchesToAPlatformRole) {
    for (const char* role : {"PLATFORM_ADMIN"}) {
        const auto res = client().Get("/api/v1/admin/fleet", bearer(mint_hs256(token_claims(role, "acme"))));
        ASSERT_TRUE(res);
        ASSERT_EQ(res->status, 200) << role << ": " << res->body;
        const json body = json::parse(res->body);
        ASSERT_EQ(body["hosts"].size(), 3u);
        EXPECT_EQ(body["hosts"][0]["host_id"], "host-a");
        EXPECT_EQ(body["hosts"][0]["state"], "live");
        EXPECT_EQ(body["hosts"][0]["handlers"][1]["file"], "libaudit.so");
        EXPECT_EQ(body["hosts"][2]["host_id"], "host-c");
        EXPECT_EQ(body["hosts"][2]["state"], "gone");
        ASSERT_EQ(body["mismatches"].size(), 1u);
        EXPECT_EQ(body["mismatches"][0]["event_type"], "OrderPlaced");
        EXPECT_EQ(body["mismatches"][0]["handler_sets"].size(), 2u);
    }
}

// Host names, pids and file names are the platform's, not a company's: company roles get 403.
TEST_F(AdminFleet, CompanyRolesAreRefused) {
    for (const char* role : {"ADMIN", "HR", "VIEWER", "platform_admin"}) {
        const auto res = client().Get("/api/v1/admin/fleet", bearer(mint_hs256(token_claims(role, "acme"))));
        ASSERT_TRUE(res);
        EXPECT_EQ(res->status, 403) << role << ": " << res->body;
        EXPECT_EQ(json::parse(res->body)["error"]["code"], "FORBIDDEN") << res->body;
        EXPECT_EQ(res->body.find("host-a"), std::string::npos);
    }
}

TEST_F(AdminFleet, ThePlatformRolesAreConfigurable) {
    restart([](admin::AdminOptions& o) { o.platform_roles = {"SRE", "OPS"}; });
    EXPECT_EQ(client().Get("/api/v1/admin/fleet", bearer(mint_hs256(token_claims("OPS", "acme"))))->status, 200);
    EXPECT_EQ(client().Get("/api/v1/admin/fleet", bearer(mint_hs256(token_claims("PLATFORM_ADMIN", "acme"))))->status,
              403);
}

TEST_F(AdminFleet, NeedsAToken) {
    const auto res = client().Get("/api/v1/admin/fleet");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 401);
    EXPECT_TRUE(json::parse(res->body).contains("error"));
}

TEST_F(AdminFleet, MetricsCountHostsByStateAndMismatches) {
    const auto res = client().Get("/metrics");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200);
    EXPECT_NE(res->body.find("outbox_fleet_hosts{state=\"live\"} 2\n"), std::string::npos) << res->body;
    EXPECT_NE(res->body.find("outbox_fleet_hosts{state=\"gone\"} 1\n"), std::string::npos) << res->body;
    EXPECT_NE(res->body.find("outbox_fleet_handler_mismatches 1\n"), std::string::npos) << res->body;
}

}  // namespace
}  // namespace outbox::test
