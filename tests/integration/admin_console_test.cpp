// The read endpoints the operator console is built on: /me, /overview, /review-groups,
// /outbox-events/{id}/history, the list's last_error_code filter, the bulk re-drive of
// selected event ids and the fleet's paused handlers. Every number is compared with the
// database's, every answer is scoped to the caller's company and carries no payload.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include <pqxx/pqxx>

#include "admin_support.hpp"
#include "operations/bulk_retry_service.hpp"
#include "operations/handler_pause.hpp"
#include "support/test_host.hpp"

namespace outbox::test {
namespace {

using nlohmann::json;

const std::string kConsoleReason = "remote fixed after incident 42";
// Payload text no answer may ever contain.
const std::string kSecret = "secret-payload-text-7731";

class AdminConsole : public AdminApi {
protected:
    json get_json(const std::string& path, const std::string& token, int expected_status = 200) {
        const auto res = client().Get(path.c_str(), bearer(token));
        EXPECT_TRUE(res) << path;
        if (!res) return {};
        EXPECT_EQ(res->status, expected_status) << path << ": " << res->body;
        EXPECT_EQ(res->body.find(kSecret), std::string::npos) << path << ": " << res->body;
        return json::parse(res->body);
    }
    std::string token(const std::string& role, const std::string& company = "acme") const {
        return mint_hs256(token_claims(role, company));
    }
    httplib::Result post(const std::string& path, const json& body, const std::string& key,
                         const std::string& token_text) {
        auto headers = bearer(token_text);
        headers.emplace("Idempotency-Key", key);
        return client().Post(path, headers, body.dump(), "application/json");
    }
    std::string payload() const { return R"({"note": ")" + kSecret + R"("})"; }
    // One event of `company` in `status`, with consistent lease and completion columns.
    std::string event_in(const std::string& status, const std::string& company = "acme",
                         const std::string& type = "TestRequested", const std::string& code = "HTTP_503") {
        const std::string id = publish_many(db_.url(), type, payload(), 1, company).at(0);
        std::string set = "status = '" + status + "'";
        if (status == "PROCESSING") {
            set += ", lease_owner = 'h', lease_token = gen_random_uuid(), lease_expires_at = now() + interval '1 minute'";
        } else if (status == "COMPLETED" || status == "DISCARDED") {
            set += ", completed_at = now()";
        } else if (status == "RETRY_WAIT" || status == "REVIEW_REQUIRED") {
            set += ", attempt_count = 2, last_error_code = '" + code + "'";
        }
        db_.exec("UPDATE event_publication SET " + set + " WHERE event_id = '" + id + "'");
        return id;
    }
    void live_host(const std::string& handlers_json) {
        db_.exec("INSERT INTO outbox_host (host_id, version, started_at, last_heartbeat_at, heartbeat_interval_ms, "
                 "enabled, handlers) VALUES ('host-a', '0.1.0', now(), now(), 60000, true, '" +
                 handlers_json + "')");
    }
    static std::string code_of(const httplib::Result& res) { return json::parse(res->body)["error"]["code"]; }
};

TEST_F(AdminConsole, MeShowsWhoTheTokenIsAndRefusesABadOne) {
    for (const char* role : {"ADMIN", "HR", "VIEWER", "PLATFORM_ADMIN"}) {
        const json me = get_json("/api/v1/admin/me", mint_hs256(token_claims(role, "acme", "bob")));
        EXPECT_EQ(me["sub"], "bob") << role;
        EXPECT_EQ(me["role"], role);
        EXPECT_EQ(me["company_id"], "acme");
        EXPECT_EQ(me["platform_role"], std::string(role) == "PLATFORM_ADMIN");
    }
    const json bad = get_json("/api/v1/admin/me", mint_hs256(token_claims("ADMIN", "acme"), "another-secret-0123456789abcdef"), 401);
    EXPECT_EQ(bad["error"]["code"], "INVALID_TOKEN");
    const json expired = get_json("/api/v1/admin/me", mint_hs256(token_claims("ADMIN", "acme", "bob", std::chrono::seconds{-60})), 401);
    EXPECT_EQ(expired["error"]["code"], "INVALID_TOKEN");
    const auto none = client().Get("/api/v1/admin/me");
    ASSERT_TRUE(none);
    EXPECT_EQ(none->status, 401);
    EXPECT_EQ(code_of(none), "UNAUTHENTICATED");
}

TEST_F(AdminConsole, TheOverviewEqualsTheDatabaseForTheCallersCompanyOnly) {
    for (const char* status : {"PENDING", "PENDING", "PROCESSING", "RETRY_WAIT", "COMPLETED", "COMPLETED", "COMPLETED",
                               "REVIEW_REQUIRED", "DISCARDED"}) {
        event_in(status);
    }
    event_in("COMPLETED", "acme", "TestBatch");
    event_in("REVIEW_REQUIRED", "acme", "TestBatch", "HTTP_422");
    // Another company's events, more of them, in every status.
    for (int i = 0; i < 2; ++i) {
        for (const char* status : {"PENDING", "PROCESSING", "RETRY_WAIT", "COMPLETED", "REVIEW_REQUIRED", "DISCARDED"}) {
            event_in(status, "globex", "TestOther");
        }
    }
    // A completion and a failure 30 minutes ago, and one outside the hour.
    const std::string old_done = event_in("COMPLETED");
    db_.exec("UPDATE event_publication SET completed_at = now() - interval '30 minutes' WHERE event_id = '" + old_done + "'");
    const std::string old_failed = event_in("RETRY_WAIT");
    db_.exec("UPDATE event_publication SET updated_at = now() - interval '30 minutes' WHERE event_id = '" + old_failed + "'");
    const std::string ancient = event_in("COMPLETED");
    db_.exec("UPDATE event_publication SET completed_at = now() - interval '3 hours' WHERE event_id = '" + ancient + "'");
    // The oldest unfinished event of a type `mailer` handles, and one it already consumed.
    const std::string late = event_in("PENDING");
    db_.exec("UPDATE event_publication SET occurred_at = now() - interval '600 seconds' WHERE event_id = '" + late + "'");
    const std::string consumed = event_in("RETRY_WAIT");
    db_.exec("UPDATE event_publication SET occurred_at = now() - interval '3600 seconds' WHERE event_id = '" + consumed + "'");
    db_.exec("INSERT INTO event_consumption (event_id, handler_name) VALUES ('" + consumed + "', 'mailer')");
    live_host(R"([{"handler": "mailer", "event_types": ["TestRequested"], "file": "libm.so", "abi": "1.0"},
                  {"handler": "batcher", "event_types": ["TestBatch"], "file": "libb.so", "abi": "1.0"}])");
    // Another company's older unfinished event of the same type is not ours.
    const std::string theirs_late = event_in("PENDING", "globex");
    db_.exec("UPDATE event_publication SET occurred_at = now() - interval '2000 seconds' WHERE event_id = '" + theirs_late + "'");

    for (const char* role : {"ADMIN", "HR", "VIEWER"}) {
        const json overview = get_json("/api/v1/admin/overview", token(role));
        ASSERT_EQ(overview["counts"].size(), 6u) << overview;
        for (const char* status : {"PENDING", "PROCESSING", "RETRY_WAIT", "COMPLETED", "REVIEW_REQUIRED", "DISCARDED"}) {
            EXPECT_EQ(overview["counts"][status].get<long long>(),
                      count(std::string("SELECT count(*) FROM event_publication WHERE company_id = 'acme' AND status = '") +
                            status + "'"))
                << role << " " << status;
        }
        std::map<std::string, long long> by_type;
        for (const auto& row : overview["by_event_type"]) {
            by_type[row["event_type"].get<std::string>() + "/" + row["status"].get<std::string>()] = row["count"];
        }
        std::map<std::string, long long> expected;
        pqxx::connection conn(db_.url());
        pqxx::nontransaction tx(conn);
        for (const auto& row : tx.exec("SELECT event_type || '/' || status, count(*) FROM event_publication "
                                       "WHERE company_id = 'acme' GROUP BY 1")) {
            expected[row[0].as<std::string>()] = row[1].as<long long>();
        }
        EXPECT_EQ(by_type, expected) << role;

        ASSERT_EQ(overview["per_minute"].size(), 60u);
        long long completed = 0;
        long long failed = 0;
        std::string previous;
        for (const auto& minute : overview["per_minute"]) {
            const std::string at = minute["minute"];
            EXPECT_TRUE(at.ends_with(":00Z")) << at;
            EXPECT_LT(previous, at) << "oldest first";
            previous = at;
            completed += minute["completed"].get<long long>();
            failed += minute["failed"].get<long long>();
        }
        EXPECT_EQ(completed, count("SELECT count(*) FROM event_publication WHERE company_id = 'acme' AND status = "
                                   "'COMPLETED' AND completed_at >= date_trunc('minute', now()) - interval '59 minutes'"));
        EXPECT_EQ(failed, count("SELECT count(*) FROM event_publication WHERE company_id = 'acme' AND status IN "
                                "('RETRY_WAIT', 'REVIEW_REQUIRED') AND updated_at >= date_trunc('minute', now()) - "
                                "interval '59 minutes'"));
        // Looked up by each event's own minute: a minute can turn between seeding and the
        // overview, which moves the events one bucket down the hour.
        const auto bucket_of = [&](const std::string& column, const std::string& id) {
            const std::string minute = db_.scalar("SELECT to_char(date_trunc('minute', " + column +
                                                  "), 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') FROM event_publication "
                                                  "WHERE event_id = '" + id + "'");
            for (const auto& m : overview["per_minute"]) {
                if (m["minute"] == minute) return m;
            }
            ADD_FAILURE() << "no bucket for " << minute << " in " << overview["per_minute"];
            return json{{"completed", -1}, {"failed", -1}};
        };
        EXPECT_EQ(bucket_of("completed_at", old_done)["completed"], 1) << "the completion 30 minutes ago, in its minute";
        EXPECT_EQ(bucket_of("updated_at", old_failed)["failed"], 1);

        std::map<std::string, double> oldest;
        for (const auto& row : overview["oldest_unfinished"]) oldest[row["handler"]] = row["oldest_seconds"];
        ASSERT_EQ(oldest.size(), 2u) << overview["oldest_unfinished"];
        EXPECT_GE(oldest["mailer"], 600.0) << "the late PENDING event, not the consumed older one";
        EXPECT_LT(oldest["mailer"], 1500.0) << "neither the consumed event nor another company's";
        EXPECT_EQ(oldest["batcher"], 0.0) << "no unfinished TestBatch event (REVIEW_REQUIRED waits for a person)";
        EXPECT_TRUE(overview["generated_at"].get<std::string>().ends_with("Z"));
    }

    // Another company sees its own numbers only.
    const json theirs = get_json("/api/v1/admin/overview", token("VIEWER", "globex"));
    for (const auto& [status, n] : theirs["counts"].items()) EXPECT_EQ(n, status == "PENDING" ? 3 : 2) << status;
    for (const auto& row : theirs["by_event_type"]) EXPECT_NE(row["event_type"], "TestBatch");
    for (const auto& row : theirs["oldest_unfinished"]) {
        if (row["handler"] == "mailer") {
            EXPECT_GE(row["oldest_seconds"].get<double>(), 2000.0) << "their own late event";
        }
    }
    const json nobody = get_json("/api/v1/admin/overview", token("VIEWER", "initech"));
    for (const auto& [status, n] : nobody["counts"].items()) EXPECT_EQ(n, 0) << status;
    EXPECT_TRUE(nobody["by_event_type"].empty());

    EXPECT_EQ(get_json("/api/v1/admin/overview", token("PLATFORM_ADMIN"), 403)["error"]["code"], "FORBIDDEN");
    get_json("/api/v1/admin/overview", mint_hs256(token_claims("ADMIN", "acme"), "another-secret-0123456789abcdef"), 401);
}

// A waiting head whose type no known handler supports holds back its aggregate for good:
// the overview names it (with its successors) so an operator can discard it. A head of a
// handled type, and another company's, are not listed.
TEST_F(AdminConsole, TheOverviewNamesHeadsThatBlockTheirAggregateWhileNoHandlerSupportsTheirType) {
    live_host(R"([{"handler": "h", "event_types": ["Handled"]}])");
    const auto publish = [&](const std::string& company, const std::string& type, const std::string& key) {
        return db_.scalar("SELECT outbox_publish('" + company + "', '" + type + "', '{}', '" + key + "')");
    };
    const std::string head = publish("acme", "RemovedType", "user-1");
    publish("acme", "Handled", "user-1");
    publish("acme", "Handled", "user-1");
    publish("acme", "Handled", "user-2");
    publish("acme", "Handled", "user-2");
    publish("acme", "RemovedType", "user-3");  // alone: blocks nothing
    publish("globex", "RemovedType", "user-1");
    publish("globex", "Handled", "user-1");
    const json overview = get_json("/api/v1/admin/overview", token("VIEWER"));
    EXPECT_EQ(overview["blocking_heads"],
              json::array({{{"event_id", head}, {"event_type", "RemovedType"}, {"status", "PENDING"}, {"successors", 2}}}))
        << overview;
}

TEST_F(AdminConsole, EachCompanysOverviewIsComputedOncePerCachePeriod) {
    restart([](admin::AdminOptions& options) { options.metrics_cache = std::chrono::hours{1}; });
    event_in("PENDING");
    const json first = get_json("/api/v1/admin/overview", token("VIEWER"));
    ASSERT_EQ(first["counts"]["PENDING"], 1) << first;
    event_in("PENDING");
    // Within the period every reader of the company gets the same computation...
    const json again = get_json("/api/v1/admin/overview", token("ADMIN"));
    EXPECT_EQ(again["counts"]["PENDING"], 1) << again;
    EXPECT_EQ(again["generated_at"], first["generated_at"]);
    // ...and another company gets its own, never ours.
    event_in("PENDING", "globex");
    EXPECT_EQ(get_json("/api/v1/admin/overview", token("VIEWER", "globex"))["counts"]["PENDING"], 1);

    restart([](admin::AdminOptions& options) { options.metrics_cache = std::chrono::milliseconds{0}; });
    EXPECT_EQ(get_json("/api/v1/admin/overview", token("VIEWER"))["counts"]["PENDING"], 2);
}

TEST_F(AdminConsole, ReviewGroupsEqualTheDatabaseAndTheListFiltersByCode) {
    std::vector<std::string> batch_422;
    for (int i = 0; i < 3; ++i) batch_422.push_back(event_in("REVIEW_REQUIRED", "acme", "TestBatch", "HTTP_422"));
    db_.exec("UPDATE event_publication SET occurred_at = now() - interval '1 hour' WHERE event_id = '" + batch_422[0] + "'");
    event_in("REVIEW_REQUIRED", "acme", "TestBatch", "HTTP_503");
    event_in("REVIEW_REQUIRED", "acme", "TestRequested", "HTTP_422");
    event_in("RETRY_WAIT", "acme", "TestBatch", "HTTP_422");  // not in review
    event_in("REVIEW_REQUIRED", "globex", "TestBatch", "HTTP_422");
    event_in("REVIEW_REQUIRED", "globex", "TestOther", "GLOBEX_ONLY");

    for (const char* role : {"ADMIN", "HR", "VIEWER"}) {
        const json answer = get_json("/api/v1/admin/review-groups", token(role));
        std::map<std::string, long long> groups;
        for (const auto& g : answer["groups"]) {
            groups[g["event_type"].get<std::string>() + "/" + g["last_error_code"].get<std::string>()] = g["count"];
        }
        std::map<std::string, long long> expected;
        pqxx::connection conn(db_.url());
        pqxx::nontransaction tx(conn);
        for (const auto& row : tx.exec("SELECT event_type || '/' || last_error_code, count(*) FROM event_publication "
                                       "WHERE company_id = 'acme' AND status = 'REVIEW_REQUIRED' GROUP BY 1")) {
            expected[row[0].as<std::string>()] = row[1].as<long long>();
        }
        EXPECT_EQ(groups, expected) << role;
        ASSERT_FALSE(answer["groups"].empty());
        const json& first = answer["groups"][0];
        EXPECT_EQ(first["event_type"], "TestBatch") << "the largest group first";
        EXPECT_EQ(first["last_error_code"], "HTTP_422");
        EXPECT_EQ(first["oldest"], db_.scalar("SELECT to_char(occurred_at AT TIME ZONE 'UTC', "
                                              "'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') FROM event_publication WHERE "
                                              "event_id = '" + batch_422[0] + "'"));
        EXPECT_LT(first["oldest"].get<std::string>(), first["newest"].get<std::string>());
    }
    EXPECT_TRUE(get_json("/api/v1/admin/review-groups", token("VIEWER", "initech"))["groups"].empty());

    // A group's events, listed with the existing list and the new filter.
    const json listed = get_json(
        "/api/v1/admin/outbox-events?status=REVIEW_REQUIRED&event_type=TestBatch&last_error_code=HTTP_422", token("VIEWER"));
    std::set<std::string> ids;
    for (const auto& e : listed["events"]) {
        EXPECT_EQ(e["last_error_code"], "HTTP_422");
        ids.insert(e["event_id"]);
    }
    EXPECT_EQ(ids, std::set<std::string>(batch_422.begin(), batch_422.end()));
    EXPECT_EQ(get_json("/api/v1/admin/outbox-events?last_error_code=HTTP_422", token("VIEWER"))["events"].size(), 5u);
    EXPECT_TRUE(get_json("/api/v1/admin/outbox-events?last_error_code=GLOBEX_ONLY", token("VIEWER"))["events"].empty());
    for (const char* bad : {"http_422", "HTTP-422", "1HTTP", "", "HTTP_422%27%20OR%201%3D1"}) {
        const json answer =
            get_json(std::string("/api/v1/admin/outbox-events?last_error_code=") + bad, token("VIEWER"), 400);
        EXPECT_EQ(answer["error"]["code"], "INVALID_LAST_ERROR_CODE") << bad;
    }
}

TEST_F(AdminConsole, HistoryShowsConsumersAndEveryOperatorAction) {
    const std::string single = review_event(db_, "acme", "TestRequested", payload());
    db_.exec("INSERT INTO event_consumption (event_id, handler_name) VALUES ('" + single + "', 'mailer')");
    auto res = post("/api/v1/admin/outbox-events/" + single + "/retry", {{"expected_version", 4}, {"reason", kConsoleReason}},
                    "one-1", admin_token());
    ASSERT_EQ(res->status, 202) << res->body;
    // Back to review, then re-driven in bulk with its id, then back to review and discarded.
    db_.exec("UPDATE event_publication SET status = 'REVIEW_REQUIRED', attempt_count = 3 WHERE event_id = '" + single + "'");
    res = post("/api/v1/admin/outbox-events/retry", {{"filter", {{"event_ids", {single}}}}, {"reason", kConsoleReason}},
               "bulk-1", admin_token());
    ASSERT_EQ(res->status, 202) << res->body;
    db_.exec("UPDATE event_publication SET status = 'REVIEW_REQUIRED', attempt_count = 1 WHERE event_id = '" + single + "'");
    res = post("/api/v1/admin/outbox-events/" + single + "/discard",
               {{"expected_version", 6}, {"reason", "duplicate of an earlier order"}}, "discard-1", admin_token());
    ASSERT_EQ(res->status, 202) << res->body;

    for (const char* role : {"ADMIN", "HR", "VIEWER"}) {
        const json history = get_json("/api/v1/admin/outbox-events/" + single + "/history", token(role));
        EXPECT_EQ(history["event_id"], single);
        ASSERT_EQ(history["consumed_by"].size(), 1u) << history;
        EXPECT_EQ(history["consumed_by"][0]["handler"], "mailer");
        EXPECT_EQ(history["consumed_by"][0]["recorded"], true);
        const json& actions = history["actions"];
        ASSERT_EQ(actions.size(), 3u) << history;
        EXPECT_EQ(actions[0]["action"], "retry");
        EXPECT_EQ(actions[0]["actor"], "alice");
        EXPECT_EQ(actions[0]["reason"], kConsoleReason);
        EXPECT_EQ(actions[0]["channel"], "api");
        EXPECT_EQ(actions[0]["from_version"], 4);
        EXPECT_EQ(actions[0]["to_version"], 5);
        EXPECT_EQ(actions[0]["previous_attempt_count"], 3);
        EXPECT_FALSE(actions[0].contains("bulk_retry_id"));
        EXPECT_EQ(actions[1]["action"], "retry");
        EXPECT_EQ(actions[1]["from_version"], 5);
        EXPECT_EQ(actions[1]["to_version"], 6);
        EXPECT_EQ(actions[1]["bulk_retry_id"].get<long long>(), count("SELECT max(id) FROM outbox_bulk_retry"));
        EXPECT_EQ(actions[2]["action"], "discard");
        EXPECT_EQ(actions[2]["reason"], "duplicate of an earlier order");
        EXPECT_EQ(actions[2]["channel"], "api");
        EXPECT_EQ(actions[2]["from_version"], 6);
        EXPECT_EQ(actions[2]["to_version"], 7);
        EXPECT_EQ(actions[2]["previous_attempt_count"], 1);
        EXPECT_LE(actions[0]["at"].get<std::string>(), actions[2]["at"].get<std::string>());
    }

    // Another company's event answers like a missing one; ids are validated.
    const json other = get_json("/api/v1/admin/outbox-events/" + single + "/history", token("ADMIN", "globex"), 403);
    EXPECT_EQ(other["error"]["code"], "EVENT_NOT_ACCESSIBLE");
    const json missing = get_json("/api/v1/admin/outbox-events/00000000-0000-4000-8000-000000000000/history", token("ADMIN"), 403);
    EXPECT_EQ(missing, other);
    EXPECT_EQ(get_json("/api/v1/admin/outbox-events/nope/history", token("ADMIN"), 400)["error"]["code"], "INVALID_EVENT_ID");
    get_json("/api/v1/admin/outbox-events/" + single + "/history", token("PLATFORM_ADMIN"), 403);
}

TEST_F(AdminConsole, CompanyRolesSeeNeitherLeaseOwnersNorCliUsersWhilePlatformRolesDo) {
    live_host("[]");
    const std::string id = review_event(db_, "acme", "TestRequested", payload());
    {
        pqxx::connection conn(db_.url());
        operations::BulkRetryRequest cli;
        cli.filter.event_ids = std::vector<std::string>{id};
        cli.filter.limit = 1;
        cli.reason = kConsoleReason;
        cli.idempotency_key = "cli-1";
        cli.actor = "cli:root";
        cli.channel = "cli";
        ASSERT_TRUE(std::holds_alternative<operations::BulkRetryAccepted>(operations::BulkRetryService(conn).retry(cli)));
        operations::set_handler_paused(conn, "mailer", true, "cli:root", "cli");
    }
    db_.exec("UPDATE event_publication SET status = 'PROCESSING', lease_owner = 'host-a', lease_token = gen_random_uuid(), "
             "lease_expires_at = now() + interval '1 minute' WHERE event_id = '" + id + "'");

    for (const char* role : {"ADMIN", "HR", "VIEWER"}) {
        const json event = get_json("/api/v1/admin/outbox-events/" + id, token(role));
        EXPECT_EQ(event["status"], "PROCESSING");
        EXPECT_FALSE(event.contains("lease_owner")) << role << ": the host name and pid are the platform's";
        const json list = get_json("/api/v1/admin/outbox-events?status=PROCESSING", token(role));
        ASSERT_EQ(list["events"].size(), 1u) << list;
        EXPECT_FALSE(list["events"][0].contains("lease_owner")) << role;
        const json history = get_json("/api/v1/admin/outbox-events/" + id + "/history", token(role));
        ASSERT_EQ(history["actions"].size(), 1u) << history;
        EXPECT_EQ(history["actions"][0]["actor"], "operator") << role << ": not the CLI's OS user";
        EXPECT_EQ(history["actions"][0]["channel"], "cli");
        for (const std::string& text : {event.dump(), list.dump(), history.dump()}) {
            EXPECT_EQ(text.find("host-a"), std::string::npos) << role << ": " << text;
            EXPECT_EQ(text.find("root"), std::string::npos) << role << ": " << text;
        }
    }
    // Platform roles read no company's events; the fleet shows them the hosts (what
    // lease_owner names) and the CLI user who paused a handler.
    get_json("/api/v1/admin/outbox-events/" + id, token("PLATFORM_ADMIN"), 403);
    const json fleet = get_json("/api/v1/admin/fleet", token("PLATFORM_ADMIN"));
    ASSERT_EQ(fleet["hosts"].size(), 1u) << fleet;
    EXPECT_EQ(fleet["hosts"][0]["host_id"], "host-a");
    ASSERT_EQ(fleet["paused"].size(), 1u) << fleet;
    EXPECT_EQ(fleet["paused"][0]["paused_by"], "cli:root");
}

TEST_F(AdminConsole, ACompletedEventWithoutConsumptionRowsListsItsHandlers) {
    live_host(R"([{"handler": "mailer", "event_types": ["TestRequested"], "file": "libm.so", "abi": "1.0"},
                  {"handler": "audit", "event_types": ["TestRequested", "TestBatch"], "file": "liba.so", "abi": "1.0"},
                  {"handler": "batcher", "event_types": ["TestBatch"], "file": "libb.so", "abi": "1.0"}])");
    const std::string done = event_in("COMPLETED");
    db_.exec("INSERT INTO event_consumption (event_id, handler_name) VALUES ('" + done + "', 'audit')");
    const json history = get_json("/api/v1/admin/outbox-events/" + done + "/history", token("VIEWER"));
    std::map<std::string, bool> consumed;
    for (const auto& c : history["consumed_by"]) {
        consumed[c["handler"]] = c["recorded"];
        EXPECT_FALSE(c["consumed_at"].get<std::string>().empty());
    }
    EXPECT_EQ(consumed, (std::map<std::string, bool>{{"audit", true}, {"mailer", false}}));
    EXPECT_TRUE(history["actions"].empty());
    const std::string waiting = event_in("PENDING");
    EXPECT_TRUE(get_json("/api/v1/admin/outbox-events/" + waiting + "/history", token("VIEWER"))["consumed_by"].empty())
        << "an unfinished event lists only what it recorded";
}

TEST_F(AdminConsole, BulkRetryOfSelectedEventIds) {
    const auto unlisted = event_in("REVIEW_REQUIRED", "acme", "TestBatch", "HTTP_422");  // the oldest
    const auto a1 = event_in("REVIEW_REQUIRED", "acme", "TestBatch", "HTTP_422");
    const auto a2 = event_in("REVIEW_REQUIRED", "acme", "TestBatch", "HTTP_422");
    const auto a3 = event_in("REVIEW_REQUIRED", "acme", "TestBatch", "HTTP_503");
    const auto g1 = event_in("REVIEW_REQUIRED", "globex", "TestBatch", "HTTP_422");
    std::string upper = a2;
    std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return std::toupper(c); });
    // a1 and a2 (given in upper case), a3 filtered out by the code, g1 another company's.
    const json body{{"filter", {{"event_ids", {a1, upper, a3, g1}}, {"last_error_code", "HTTP_422"}}}, {"reason", kConsoleReason}};
    auto res = post("/api/v1/admin/outbox-events/retry", body, "sel-1", admin_token());
    ASSERT_EQ(res->status, 202) << res->body;
    const json answer = json::parse(res->body);
    std::vector<std::string> ids = answer["event_ids"];
    std::sort(ids.begin(), ids.end());
    std::vector<std::string> expected{a1, a2};
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(ids, expected);
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE status = 'PENDING' AND event_id IN ('" + a1 + "', '" + a2 + "')"), 2);
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE status = 'REVIEW_REQUIRED' AND event_id IN ('" + a3 +
                    "', '" + g1 + "', '" + unlisted + "')"),
              3);
    res = post("/api/v1/admin/outbox-events/retry", body, "sel-1", admin_token());
    ASSERT_EQ(res->status, 202);
    EXPECT_EQ(res->get_header_value("Idempotent-Replayed"), "true");
    EXPECT_EQ(json::parse(res->body), answer);

    // Only ids: every one listed (no default limit of 100 cuts them).
    res = post("/api/v1/admin/outbox-events/retry", {{"filter", {{"event_ids", {a3}}}}, {"reason", kConsoleReason}}, "sel-2",
               admin_token());
    ASSERT_EQ(res->status, 202) << res->body;
    EXPECT_EQ(json::parse(res->body)["event_ids"], json::array({a3}));
    EXPECT_EQ(db_.scalar("SELECT status FROM event_publication WHERE event_id = '" + unlisted + "'"), "REVIEW_REQUIRED");

    for (const json& filter : {json{{"event_ids", json::array()}}, json{{"event_ids", {"not-a-uuid"}}},
                               json{{"event_ids", {1}}}, json{{"event_ids", "a"}}, json{{"event_ids", {a1, "x"}}}}) {
        res = post("/api/v1/admin/outbox-events/retry", {{"filter", filter}, {"reason", kConsoleReason}}, "sel-bad", admin_token());
        ASSERT_TRUE(res);
        EXPECT_EQ(res->status, 400) << filter.dump().substr(0, 80);
        EXPECT_EQ(code_of(res), "INVALID_FILTER");
    }
    // More than 1000 ids is refused by the service itself (the CLI's path too); over HTTP
    // the 16 KiB body limit (about 400 ids) refuses such a request first.
    operations::BulkRetryRequest request;
    request.filter.event_ids = std::vector<std::string>(1001, a1);
    request.reason = kConsoleReason;
    request.idempotency_key = "k";
    const auto rejected = operations::validate_bulk_retry_request(request);
    ASSERT_TRUE(rejected);
    EXPECT_EQ(rejected->code, "INVALID_FILTER");
    request.filter.event_ids->resize(1000);
    EXPECT_FALSE(operations::validate_bulk_retry_request(request));
    request.filter.event_ids = std::vector<std::string>{upper};
    EXPECT_TRUE(operations::validate_bulk_retry_request(request)) << "the service takes lower-case ids only";
    for (const char* role : {"HR", "VIEWER"}) {
        res = post("/api/v1/admin/outbox-events/retry", body, "sel-3", token(role));
        EXPECT_EQ(res->status, 403) << role;
    }
}

TEST_F(AdminConsole, TheFleetListsPausedHandlers) {
    live_host(R"([{"handler": "mailer", "event_types": ["TestRequested"], "file": "libm.so", "abi": "1.0"}])");
    const std::string platform = token("PLATFORM_ADMIN");
    auto res = post("/api/v1/admin/handlers/mailer/pause", json::object(), "p-1", platform);
    ASSERT_EQ(res->status, 200) << res->body;
    json fleet = get_json("/api/v1/admin/fleet", platform);
    ASSERT_EQ(fleet["paused"].size(), 1u) << fleet;
    EXPECT_EQ(fleet["paused"][0]["handler"], "mailer");
    EXPECT_EQ(fleet["paused"][0]["paused_by"], "alice");
    EXPECT_EQ(fleet["paused"][0]["paused_at"],
              db_.scalar("SELECT to_char(paused_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') FROM "
                         "outbox_handler_pause"));
    EXPECT_EQ(fleet["hosts"][0]["handlers"][0]["handler"], "mailer");
    res = post("/api/v1/admin/handlers/mailer/resume", json::object(), "p-2", platform);
    ASSERT_EQ(res->status, 200);
    EXPECT_TRUE(get_json("/api/v1/admin/fleet", platform)["paused"].empty());
    get_json("/api/v1/admin/fleet", token("ADMIN"), 403);
}

}  // namespace
}  // namespace outbox::test
