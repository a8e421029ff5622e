// The listener itself: JSON errors for every refusal, limits, probes, and binding.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>

#include "admin_support.hpp"
#include "support/ports.hpp"
#include "support/test_host.hpp"

namespace outbox::test {
namespace {

using nlohmann::json;

class AdminHttp : public AdminApi {
protected:
    static void expect_json_error(const httplib::Result& res, int status, const std::string& code) {
        ASSERT_TRUE(res);
        EXPECT_EQ(res->status, status) << res->body;
        EXPECT_EQ(res->get_header_value("Content-Type"), "application/json");
        const json answer = json::parse(res->body, nullptr, false);
        ASSERT_FALSE(answer.is_discarded()) << res->body;
        EXPECT_EQ(answer["error"]["code"], code) << res->body;
        EXPECT_TRUE(answer["error"]["message"].is_string()) << res->body;
    }
};

TEST_F(AdminHttp, UnknownPathsAre404Json) {
    expect_json_error(client().Get("/nope"), 404, "NOT_FOUND");
    expect_json_error(client().Get("/api/v1/admin/outbox-events/a/b/c"), 404, "NOT_FOUND");
    expect_json_error(client().Post("/nope", "{}", "application/json"), 404, "NOT_FOUND");
}

TEST_F(AdminHttp, AKnownPathWithTheWrongMethodIs405WithAllow) {
    const auto res = client().Delete("/metrics");
    expect_json_error(res, 405, "METHOD_NOT_ALLOWED");
    EXPECT_EQ(res->get_header_value("Allow"), "GET");
    const auto get_retry = client().Get("/api/v1/admin/outbox-events/0b6f4d1e-8a53-4c1a-9a57-3c8f1a2b7e10/retry");
    expect_json_error(get_retry, 405, "METHOD_NOT_ALLOWED");
    EXPECT_EQ(get_retry->get_header_value("Allow"), "POST");
    expect_json_error(client().Put("/api/v1/admin/outbox-events", "{}", "application/json"), 405,
                      "METHOD_NOT_ALLOWED");
}

TEST_F(AdminHttp, AVeryLongPathIs414Json) {
    expect_json_error(client().Get(("/api/v1/admin/outbox-events/" + std::string(35000, 'a')).c_str()), 414,
                      "URI_TOO_LONG");
    // The listener still serves afterwards.
    const auto res = client().Get("/healthz");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
}

TEST_F(AdminHttp, ABodyOverTheLimitIs413Json) {
    const std::string id = review_event(db_);
    httplib::Headers headers = bearer(admin_token());
    headers.emplace("Idempotency-Key", "big");
    const std::string big = json{{"expected_version", 4}, {"reason", std::string(20000, 'x')}}.dump();
    expect_json_error(client().Post(("/api/v1/admin/outbox-events/" + id + "/retry").c_str(), headers, big,
                                    "application/json"),
                      413, "PAYLOAD_TOO_LARGE");
    EXPECT_EQ(db_.scalar("SELECT status FROM event_publication WHERE event_id = '" + id + "'"), "REVIEW_REQUIRED");
}

TEST_F(AdminHttp, MalformedJsonIs400Json) {
    const std::string id = review_event(db_);
    httplib::Headers headers = bearer(admin_token());
    headers.emplace("Idempotency-Key", "k");
    expect_json_error(client().Post(("/api/v1/admin/outbox-events/" + id + "/retry").c_str(), headers, "{\"expected",
                                    "application/json"),
                      400, "MALFORMED_JSON");
}

TEST_F(AdminHttp, HealthzAnswersWithoutTheDatabase) {
    restart([](admin::AdminOptions& o) { o.database_url = "postgresql://postgres@127.0.0.1:" + std::to_string(free_port()) + "/x"; });
    const auto res = client().Get("/healthz");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
}

TEST_F(AdminHttp, ReadyzIs200WhenTheDatabaseAnswersAnd503WhenItIsDown) {
    const auto up = client().Get("/readyz");
    ASSERT_TRUE(up);
    EXPECT_EQ(up->status, 200) << up->body;

    restart([](admin::AdminOptions& o) { o.database_url = "postgresql://postgres@127.0.0.1:" + std::to_string(free_port()) + "/x"; });
    const auto down = client().Get("/readyz");
    expect_json_error(down, 503, "DATABASE_UNAVAILABLE");
    // The API reports the outage the same way instead of hanging or failing with 500.
    expect_json_error(client().Get("/api/v1/admin/outbox-events", bearer(admin_token())), 503, "DATABASE_UNAVAILABLE");
    // /metrics still answers with this host's counters and says the database part is missing.
    const auto metrics = client().Get("/metrics");
    ASSERT_TRUE(metrics);
    EXPECT_EQ(metrics->status, 200);
    EXPECT_NE(metrics->body.find("outbox_database_up 0\n"), std::string::npos) << metrics->body;
    EXPECT_EQ(metrics->body.find("outbox_publications_backlog"), std::string::npos) << metrics->body;
}

TEST_F(AdminHttp, PooledConnectionsTheServerDroppedAreReplacedTransparently) {
    const auto token = admin_token();
    ASSERT_EQ(client().Get("/api/v1/admin/outbox-events", bearer(token))->status, 200);
    ASSERT_EQ(client().Get("/readyz")->status, 200);
    // As after a database restart: every idle pooled connection is dead.
    EXPECT_GE(count("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND pid <> pg_backend_pid()"),
              1);
    const auto res = client().Get("/api/v1/admin/outbox-events", bearer(token));
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200) << res->body;
    EXPECT_EQ(client().Get("/readyz")->status, 200);
}

TEST_F(AdminHttp, ReadyzNeedsAHandlerOnlyWhileProcessingIsEnabled) {
    restart([](admin::AdminOptions& o) { o.processing_enabled = true; });
    expect_json_error(client().Get("/readyz"), 503, "NO_HANDLERS");
    restart([](admin::AdminOptions& o) { o.processing_enabled = false; });
    const auto res = client().Get("/readyz");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200) << res->body;
}

TEST_F(AdminHttp, ReadyzAndMetricsFollowTheHandlersTheHostRoutesToNow) {
    TestHost host(fast_options(db_.url(), "h"), {OUTBOX_FIXTURE_SCRIPTED});
    host.start();
    std::atomic<std::shared_ptr<const routing::HandlerSet>> current;  // nothing loaded yet
    admin::AdminOptions options = default_options();
    options.processing_enabled = true;
    admin::AdminServer server(options, metrics_,
                              admin::AdminServer::HandlerSource([&current] { return current.load(); }));
    server.start();
    httplib::Client c("127.0.0.1", server.port());
    expect_json_error(c.Get("/readyz"), 503, "NO_HANDLERS");
    EXPECT_EQ(c.Get("/metrics")->body.find("handler=\"scripted\""), std::string::npos);

    current.store(std::shared_ptr<const routing::HandlerSet>(std::shared_ptr<void>{}, &host.handlers()));
    const auto ready = c.Get("/readyz");
    ASSERT_TRUE(ready);
    EXPECT_EQ(ready->status, 200) << ready->body;
    EXPECT_NE(c.Get("/metrics")->body.find(R"(outbox_publications_oldest_delay_seconds{handler="scripted"} 0)"),
              std::string::npos);
    server.stop();
}

TEST_F(AdminHttp, ABusyPortIsAStartUpErrorNamingTheAddress) {
    const HeldPort busy;
    admin::AdminOptions options = default_options();
    options.listen.port = busy.port();
    admin::AdminServer server(options, metrics_, kNoHandlers);
    try {
        server.start();
        FAIL() << "started on a busy port";
    } catch (const admin::AdminStartError& e) {
        EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(busy.port())), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("Address already in use"), std::string::npos) << e.what();
    }
}

TEST_F(AdminHttp, TwoServersCannotShareAPort) {
    admin::AdminOptions options = default_options();
    options.listen.port = server_->port();
    admin::AdminServer second(options, metrics_, kNoHandlers);
    EXPECT_THROW(second.start(), admin::AdminStartError);
}

TEST_F(AdminHttp, StopEndsKeepAliveConnectionsAndReturns) {
    // An idle connection would stay open a minute: a stop that waited for it takes that long.
    restart([](admin::AdminOptions& o) { o.keep_alive_timeout = std::chrono::seconds{60}; });
    httplib::Client c = client();
    c.set_keep_alive(true);
    ASSERT_TRUE(c.Get("/healthz"));
    const auto started = std::chrono::steady_clock::now();
    server_->stop();
    // Milliseconds when right; 10 s allows a loaded machine and is far below the minute.
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds{10});
}

}  // namespace
}  // namespace outbox::test
