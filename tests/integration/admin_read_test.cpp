// GET /api/v1/admin/outbox-events and /{id}: the operator's view, never the payload, only
// the caller's company, keyset paging.
#include <gtest/gtest.h>

#include <set>

#include "admin_support.hpp"
#include "support/test_host.hpp"

namespace outbox::test {
namespace {

using nlohmann::json;

class AdminRead : public AdminApi {
protected:
    json get_json(const std::string& path, int expected_status = 200) {
        const auto res = client().Get(path.c_str(), bearer(mint_hs256(token_claims("VIEWER", "acme"))));
        EXPECT_TRUE(res) << path;
        if (!res) return {};
        EXPECT_EQ(res->status, expected_status) << path << ": " << res->body;
        return json::parse(res->body);
    }
};

TEST_F(AdminRead, AnEventIsShownWithItsStateAndConsumersButNeverItsPayload) {
    const std::string id =
        review_event(db_, "acme", "TestRequested", R"({"website_id": "secret-looking-value", "domain": "example.com"})");
    db_.exec("INSERT INTO event_consumption (event_id, handler_name) VALUES ('" + id + "', 'scripted-b'), ('" + id +
             "', 'scripted')");
    const json event = get_json("/api/v1/admin/outbox-events/" + id);
    std::set<std::string> keys;
    for (const auto& [key, value] : event.items()) keys.insert(key);
    EXPECT_EQ(keys, (std::set<std::string>{"event_id", "company_id", "event_type", "aggregate_key", "status",
                                           "attempt_count", "next_attempt_at", "last_error_code", "version",
                                           "occurred_at", "updated_at", "completed_at", "lease_expires_at",
                                           "deliver_after", "blocked_by", "consumed_by"}))
        << "no lease_owner: it names the platform's host";
    EXPECT_TRUE(event["deliver_after"].is_null()) << "published without a delay";
    EXPECT_EQ(event["event_id"], id);
    EXPECT_EQ(event["company_id"], "acme");
    EXPECT_EQ(event["status"], "REVIEW_REQUIRED");
    EXPECT_EQ(event["attempt_count"], 3);
    EXPECT_EQ(event["version"], 4);
    EXPECT_EQ(event["last_error_code"], "HTTP_422");
    EXPECT_TRUE(event["completed_at"].is_null());
    EXPECT_EQ(event["consumed_by"], json::array({"scripted", "scripted-b"}));
    EXPECT_TRUE(event["occurred_at"].get<std::string>().ends_with("+00:00")) << event["occurred_at"];
    const std::string text = event.dump();
    EXPECT_EQ(text.find("secret-looking-value"), std::string::npos) << text;
    EXPECT_EQ(text.find("example.com"), std::string::npos) << text;

    const json upper = get_json("/api/v1/admin/outbox-events/" + [&] {
        std::string u = id;
        for (auto& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        return u;
    }());
    EXPECT_EQ(upper["event_id"], id) << "ids are case-insensitive";
    get_json("/api/v1/admin/outbox-events/not-a-uuid", 400);
}

TEST_F(AdminRead, TheListShowsOnlyTheCallersCompanyNewestFirstInPages) {
    const auto ours = publish_many(db_.url(), "TestRequested", R"({"k": "v"})", 7);
    publish_many(db_.url(), "TestRequested", "{}", 3, "globex");
    // Distinct occurred_at, the last published newest.
    for (std::size_t i = 0; i < ours.size(); ++i) {
        db_.exec("UPDATE event_publication SET occurred_at = now() - interval '" + std::to_string(100 - i) +
                 " seconds' WHERE event_id = '" + ours[i] + "'");
    }
    std::vector<std::string> seen;
    std::string path = "/api/v1/admin/outbox-events?limit=3";
    int pages = 0;
    for (;;) {
        const json page = get_json(path);
        ++pages;
        ASSERT_LE(page["events"].size(), 3u);
        for (const auto& event : page["events"]) {
            EXPECT_EQ(event["company_id"], "acme");
            EXPECT_FALSE(event.contains("payload"));
            seen.push_back(event["event_id"]);
        }
        if (page["next_cursor"].is_null()) break;
        path = "/api/v1/admin/outbox-events?limit=3&cursor=" + page["next_cursor"].get<std::string>();
        ASSERT_LT(pages, 10);
    }
    EXPECT_EQ(pages, 3);
    const std::vector<std::string> newest_first(ours.rbegin(), ours.rend());
    EXPECT_EQ(seen, newest_first);
}

TEST_F(AdminRead, PagingNeverSkipsOrRepeatsRowsWithTheSameOccurredAt) {
    publish_many(db_.url(), "TestRequested", "{}", 25);  // one transaction: one occurred_at for all
    std::set<std::string> seen;
    std::string path = "/api/v1/admin/outbox-events?limit=4";
    for (int pages = 0; pages < 20; ++pages) {
        const json page = get_json(path);
        for (const auto& event : page["events"]) EXPECT_TRUE(seen.insert(event["event_id"]).second);
        if (page["next_cursor"].is_null()) break;
        path = "/api/v1/admin/outbox-events?limit=4&cursor=" + page["next_cursor"].get<std::string>();
    }
    EXPECT_EQ(seen.size(), 25u);
}

TEST_F(AdminRead, TheListFiltersByStatusAndType) {
    const std::string review = review_event(db_);
    publish_many(db_.url(), "TestRequested", "{}", 2);
    publish_many(db_.url(), "TestBatch", "{}", 3);
    const json by_status = get_json("/api/v1/admin/outbox-events?status=REVIEW_REQUIRED");
    ASSERT_EQ(by_status["events"].size(), 1u);
    EXPECT_EQ(by_status["events"][0]["event_id"], review);
    EXPECT_EQ(get_json("/api/v1/admin/outbox-events?event_type=TestBatch")["events"].size(), 3u);
    EXPECT_EQ(get_json("/api/v1/admin/outbox-events?event_type=TestRequested&status=PENDING")["events"].size(), 2u);
    EXPECT_EQ(get_json("/api/v1/admin/outbox-events")["events"].size(), 6u);
}

TEST_F(AdminRead, MalformedFiltersAre400) {
    for (const char* query : {"limit=0", "limit=201", "limit=ten", "status=DONE", "event_type=lower_case",
                              "cursor=garbage", "cursor=123.not-a-uuid"}) {
        const json answer = get_json(std::string("/api/v1/admin/outbox-events?") + query, 400);
        EXPECT_TRUE(answer["error"].contains("code")) << query;
    }
    get_json("/api/v1/admin/outbox-events?limit=200");
}

}  // namespace
}  // namespace outbox::test
