// The admin API cannot starve itself: probes have their own connections, /metrics gauges
// are cached with one computation in flight, every admin statement has a timeout, and a
// retry never locks (or waits for) another company's event.
#include <gtest/gtest.h>

#include <future>
#include <thread>
#include <vector>

#include <pqxx/pqxx>

#include "admin_support.hpp"
#include "support/test_host.hpp"

namespace outbox::test {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

class AdminStarvation : public AdminApi {
protected:
    /// Backends of this database waiting for a lock while running a statement on `table`.
    long long waiting_on(const std::string& table) const {
        return count("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = "
                     "'Lock' AND query LIKE '%" + table + "%'");
    }
};

TEST_F(AdminStarvation, ReadyzAnswersWhileEveryApiConnectionIsBusy) {
    pqxx::connection locker(db_.url());
    pqxx::work hold(locker);
    hold.exec("LOCK TABLE event_publication IN ACCESS EXCLUSIVE MODE");
    // Two companies, as one may hold only 2 of the 4 API connections.
    std::vector<std::future<httplib::Result>> lists;
    for (int i = 0; i < 4; ++i) {
        lists.push_back(std::async(std::launch::async, [this, token = admin_token(i % 2 == 0 ? "acme" : "globex")] {
            return client().Get("/api/v1/admin/outbox-events", bearer(token));
        }));
    }
    ASSERT_TRUE(wait_until([&] { return waiting_on("event_publication") >= 4; }, 10s));
    httplib::Client probe("127.0.0.1", server_->port());
    // The probe's own bound (probe_timeout 2 s + 1 s); a probe that waited for an API
    // connection would wait for the lock until the 5 s statement timeout frees one.
    probe.set_read_timeout(3s);
    for (int i = 0; i < 3; ++i) {
        const auto ready = probe.Get("/readyz");
        ASSERT_TRUE(ready) << "no answer within 3 s";
        EXPECT_EQ(ready->status, 200) << ready->body;
    }
    hold.abort();
    for (auto& list : lists) {
        const auto res = list.get();
        ASSERT_TRUE(res);
        // Those that found no free API connection within 2 s were told so.
        EXPECT_TRUE(res->status == 200 || (res->status == 503 && json::parse(res->body)["error"]["code"] == "BUSY"))
            << res->body;
    }
}

// L5: one company holding every connection it may have (two retries waiting for rows the
// test locked) gets 503 BUSY at once for a third call, while another company is served.
TEST_F(AdminStarvation, OneCompanyCannotTakeEveryApiConnection) {
    const std::string first = review_event(db_, "acme");
    const std::string second = review_event(db_, "acme");
    pqxx::connection locker(db_.url());
    pqxx::work hold(locker);
    hold.exec("SELECT 1 FROM event_publication WHERE event_id IN ('" + first + "', '" + second + "') FOR UPDATE");
    const json body{{"expected_version", 4}, {"reason", "customer asked for it again"}};
    // The defaults: 4 API connections, 2 per company. The retries wait up to their 5 s lock_timeout.
    auto retry_first = std::async(std::launch::async, [&] { return post_retry(first, body, "slow-1"); });
    auto retry_second = std::async(std::launch::async, [&] { return post_retry(second, body, "slow-2"); });
    ASSERT_TRUE(wait_until([&] { return waiting_on("event_publication") >= 2; }, 10s));

    const auto started = std::chrono::steady_clock::now();
    const auto third = client().Get("/api/v1/admin/outbox-events", bearer(admin_token("acme")));
    const auto waited = std::chrono::steady_clock::now() - started;
    ASSERT_TRUE(third);
    EXPECT_EQ(third->status, 503) << third->body;
    EXPECT_EQ(json::parse(third->body)["error"]["code"], "BUSY") << third->body;
    EXPECT_LT(waited, 1s) << "refused at once, not after the 2 s pool wait";
    for (const char* role : {"VIEWER", "ADMIN"}) {
        const auto other = client().Get("/api/v1/admin/outbox-events", bearer(mint_hs256(token_claims(role, "globex"))));
        ASSERT_TRUE(other);
        EXPECT_EQ(other->status, 200) << role << " of another company: " << other->body;
    }
    EXPECT_EQ(waiting_on("event_publication"), 2) << "the slow calls were still running";

    hold.abort();
    for (auto* retry : {&retry_first, &retry_second}) {
        const auto res = retry->get();
        ASSERT_TRUE(res);
        EXPECT_EQ(res->status, 202) << res->body;
    }
    const auto after = client().Get("/api/v1/admin/outbox-events", bearer(admin_token("acme")));
    ASSERT_TRUE(after);
    EXPECT_EQ(after->status, 200) << "the slots are given back: " << after->body;
}

TEST_F(AdminStarvation, MetricsGaugesAreReusedForTheCachePeriod) {
    restart([](admin::AdminOptions& o) { o.metrics_cache = 1h; });
    const std::string gauge = "outbox_publications_backlog{status=\"PENDING\"} ";
    ASSERT_NE(client().Get("/metrics")->body.find(gauge + "0\n"), std::string::npos);
    publish_many(db_.url(), "TestRequested", "{}", 3);
    EXPECT_NE(client().Get("/metrics")->body.find(gauge + "0\n"), std::string::npos) << "computed again within the period";
    restart([](admin::AdminOptions& o) { o.metrics_cache = 0ms; });
    EXPECT_NE(client().Get("/metrics")->body.find(gauge + "3\n"), std::string::npos);
}

TEST_F(AdminStarvation, OneMetricsComputationIsInFlightWhateverTheScrapers) {
    restart([](admin::AdminOptions& o) { o.metrics_cache = 0ms; });
    pqxx::connection locker(db_.url());
    pqxx::work hold(locker);
    hold.exec("LOCK TABLE outbox_host IN ACCESS EXCLUSIVE MODE");
    std::vector<std::future<httplib::Result>> scrapes;
    for (int i = 0; i < 6; ++i) {
        scrapes.push_back(std::async(std::launch::async, [&] { return client().Get("/metrics"); }));
    }
    ASSERT_TRUE(wait_until([&] { return waiting_on("outbox_host") >= 1; }, 10s));
    std::this_thread::sleep_for(300ms);
    EXPECT_EQ(waiting_on("outbox_host"), 1) << "scrapers during a computation wait for it or reuse the last value";
    hold.abort();
    for (auto& scrape : scrapes) {
        const auto res = scrape.get();
        ASSERT_TRUE(res);
        EXPECT_EQ(res->status, 200);
    }
}

TEST_F(AdminStarvation, TheFleetReadHasAStatementTimeout) {
    restart([](admin::AdminOptions& o) { o.statement_timeout = 500ms; });
    pqxx::connection locker(db_.url());
    pqxx::work hold(locker);
    hold.exec("LOCK TABLE outbox_host IN ACCESS EXCLUSIVE MODE");
    const auto res = client().Get("/api/v1/admin/fleet", bearer(mint_hs256(token_claims("PLATFORM_ADMIN", "acme"))));
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 503) << res->body;
    EXPECT_EQ(json::parse(res->body)["error"]["code"], "TIMEOUT") << res->body;
}

// Another company's event answers exactly like a missing one (403 EVENT_NOT_ACCESSIBLE),
// at once, even while that event is locked: the caller never locks or waits for it.
TEST_F(AdminStarvation, ARetryNeverLocksOrWaitsForAnotherCompanysEvent) {
    const std::string id = review_event(db_, "acme");
    pqxx::connection locker(db_.url());
    pqxx::work hold(locker);
    hold.exec_params("SELECT 1 FROM event_publication WHERE event_id = $1::uuid FOR UPDATE", id);
    const auto res = post_retry(id, {{"expected_version", 4}, {"reason", "customer asked for it again"}}, "k1",
                                admin_token("globex"));
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 403) << res->body;
    EXPECT_EQ(json::parse(res->body)["error"]["code"], "EVENT_NOT_ACCESSIBLE") << res->body;
    const auto missing = post_retry("0b6f4d1e-8a53-4c1a-9a57-3c8f1a2b7e10",
                                    {{"expected_version", 4}, {"reason", "customer asked for it again"}}, "k2",
                                    admin_token("globex"));
    ASSERT_TRUE(missing);
    EXPECT_EQ(missing->status, 403);
    EXPECT_EQ(json::parse(missing->body)["error"], json::parse(res->body)["error"]) << "indistinguishable";
}

TEST_F(AdminStarvation, ADiscardNeverLocksOrWaitsForAnotherCompanysEvent) {
    const std::string id = review_event(db_, "acme");
    pqxx::connection locker(db_.url());
    pqxx::work hold(locker);
    hold.exec_params("SELECT 1 FROM event_publication WHERE event_id = $1::uuid FOR UPDATE", id);
    const auto discard = [&](const std::string& event_id, const std::string& key) {
        auto headers = bearer(admin_token("globex"));
        headers.emplace("Idempotency-Key", key);
        return client().Post("/api/v1/admin/outbox-events/" + event_id + "/discard", headers,
                             json{{"expected_version", 4}, {"reason", "customer asked us to drop it"}}.dump(),
                             "application/json");
    };
    const auto res = discard(id, "d1");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 403) << res->body;
    const auto missing = discard("0b6f4d1e-8a53-4c1a-9a57-3c8f1a2b7e10", "d2");
    ASSERT_TRUE(missing);
    EXPECT_EQ(missing->status, 403);
    EXPECT_EQ(json::parse(missing->body)["error"], json::parse(res->body)["error"]) << "indistinguishable";
}

}  // namespace
}  // namespace outbox::test
