// Operator jobs over HTTP and in batches: POST /api/v1/admin/operations (dry run and real
// run), GET .../operations/{id}, POST .../operations/{id}/cancel; the runner that works them
// (operations::OperationRunner, work_operation_batch) against a real PostgreSQL.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include <pqxx/pqxx>

#include "admin_support.hpp"
#include "db/outage_log.hpp"
#include "operations/operation_job.hpp"
#include "operations/operation_runner.hpp"
#include "support/test_host.hpp"

namespace outbox::test {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

const std::string kJobReason = "remote fixed after incident 42";

class AdminOperations : public AdminApi {
protected:
    httplib::Result post(const std::string& path, const json& body, const std::string& key,
                         const std::string& token) {
        auto headers = bearer(token);
        if (!key.empty()) headers.emplace("Idempotency-Key", key);
        return client().Post(path, headers, body.dump(), "application/json");
    }
    httplib::Result start(const json& body, const std::string& key, const std::string& token = {}) {
        return post("/api/v1/admin/operations", body, key, token.empty() ? admin_token() : token);
    }
    json show(const std::string& id, const std::string& token = {}) {
        const auto res = client().Get("/api/v1/admin/operations/" + id, bearer(token.empty() ? admin_token() : token));
        EXPECT_TRUE(res);
        EXPECT_EQ(res->status, 200) << res->body;
        return json::parse(res->body);
    }
    static json body(const std::string& action, const json& filter, bool dry_run = false) {
        return {{"action", action}, {"filter", filter}, {"reason", kJobReason}, {"dry_run", dry_run}};
    }
    static std::string code_of(const httplib::Result& res) { return json::parse(res->body)["error"]["code"]; }

    // `n` events of `company` in REVIEW_REQUIRED with `code`, published in one statement (so
    // with one occurred_at: a job orders them by id).
    void review_events(int n, const std::string& company = "acme", const std::string& code = "HTTP_422") {
        db_.exec("SELECT outbox_publish('" + company + "', 'TestRequested', '{}'::jsonb) FROM generate_series(1, " +
                 std::to_string(n) + ")");
        db_.exec("UPDATE event_publication SET status = 'REVIEW_REQUIRED', attempt_count = 3, version = 4, "
                 "last_error_code = '" + code + "', next_attempt_at = now() + interval '1 hour' "
                 "WHERE status = 'PENDING' AND company_id = '" + company + "'");
    }
    std::string started_id(const httplib::Result& res) {
        EXPECT_TRUE(res);
        EXPECT_EQ(res->status, 202) << res->body;
        return json::parse(res->body)["operation_id"];
    }
    // Batches of this job, worked here as a host's runner would, until none is left.
    int work_all(const std::string& id, int batch_size = 500) {
        pqxx::connection conn(db_.url());
        int batches = 0;
        for (int i = 0; i < 1000; ++i) {
            const auto batch = operations::work_operation_batch(conn, batch_size, id);
            if (!batch.worked || batch.finished) break;
            ++batches;
        }
        return batches;
    }
};

TEST_F(AdminOperations, DryRunCountsTheMatchingEventsOfTheCompanyAndChangesNothing) {
    review_events(30);
    review_events(5, "acme", "HTTP_500");
    review_events(3, "globex");
    const std::string before = db_.scalar("SELECT string_agg(event_id || status || version, ',' ORDER BY event_id) "
                                          "FROM event_publication");
    const auto res = start(body("redrive", {{"last_error_code", "HTTP_422"}}, true), "");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    const json answer = json::parse(res->body);
    EXPECT_EQ(answer["count"], 30) << "globex's three and acme's HTTP_500 five are not counted";
    ASSERT_EQ(answer["sample_event_ids"].size(), static_cast<std::size_t>(operations::kOperationSample));
    for (const auto& id : answer["sample_event_ids"]) {
        EXPECT_EQ(db_.scalar("SELECT company_id || '/' || last_error_code FROM event_publication WHERE event_id = '" +
                             id.get<std::string>() + "'"),
                  "acme/HTTP_422");
    }
    EXPECT_EQ(json::parse(start(body("discard", {{"status", "REVIEW_REQUIRED"}}, true), "")->body)["count"], 35);
    EXPECT_EQ(json::parse(start(body("cancel", {{"event_type", "TestRequested"}}, true), "")->body)["count"], 0)
        << "cancel takes PENDING and RETRY_WAIT events only";
    EXPECT_EQ(db_.scalar("SELECT string_agg(event_id || status || version, ',' ORDER BY event_id) FROM event_publication"),
              before);
    EXPECT_EQ(count("SELECT count(*) FROM outbox_operation"), 0);
    EXPECT_EQ(count("SELECT count(*) FROM audit_event"), 0);
}

TEST_F(AdminOperations, AJobOverMoreThanAThousandEventsRunsInBatchesWithOneRecordAndAuditRowPerEvent) {
    review_events(2500);
    review_events(4, "globex");
    const std::string id = started_id(start(body("redrive", {{"event_type", "TestRequested"}}), "big-1"));
    json status = show(id);
    EXPECT_EQ(status["state"], "running");
    EXPECT_EQ(status["total"], 2500);
    EXPECT_EQ(status["done"], 0);

    // The fleet's runner, as every host runs it.
    db::OutageLog outage;
    std::jthread runner([&](std::stop_token stop) {
        operations::OperationRunner(db_.url(), outage, 50ms, operations::kOperationBatchSize).run(stop);
    });
    ASSERT_TRUE(wait_until([&] { return show(id)["state"] == "done"; }, 60s)) << show(id).dump();
    runner.request_stop();
    status = show(id);
    EXPECT_EQ(status["done"], 2500);
    EXPECT_EQ(status["failed"], 0);
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE company_id = 'acme' AND status = 'PENDING' "
                    "AND attempt_count = 0 AND version = 5"),
              2500);
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE company_id = 'globex' AND status = 'REVIEW_REQUIRED'"), 4);
    EXPECT_EQ(count("SELECT count(DISTINCT event_id) FROM outbox_manual_retry"), 2500);
    EXPECT_EQ(count("SELECT count(*) FROM outbox_manual_retry"), 2500);
    EXPECT_EQ(count("SELECT count(*) FROM audit_event WHERE action = 'outbox.manual_retry' AND detail ->> "
                    "'operation_id' = '" + id + "' AND detail ->> 'channel' = 'api' AND actor = 'alice'"),
              2500);
    EXPECT_EQ(count("SELECT count(DISTINCT target_id) FROM audit_event WHERE action = 'outbox.manual_retry'"), 2500);
    // Each batch is one transaction (one now()): 2,500 events in batches of 500.
    EXPECT_EQ(count("SELECT count(DISTINCT created_at) FROM outbox_manual_retry"), 5);
    EXPECT_EQ(count("SELECT count(*) FROM audit_event WHERE action = 'outbox.operation_start' AND target_id = '" + id + "'"), 1);
}

TEST_F(AdminOperations, CancelStopsAJobPartWayWithConsistentCounts) {
    review_events(2500);
    const std::string id = started_id(start(body("discard", {{"last_error_code", "HTTP_422"}}), "cancel-1"));
    pqxx::connection conn(db_.url());
    for (int i = 0; i < 2; ++i) ASSERT_TRUE(operations::work_operation_batch(conn, 500, id).worked);

    auto res = post("/api/v1/admin/operations/" + id + "/cancel", json::object(), "c-1", admin_token());
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    EXPECT_EQ(json::parse(res->body)["state"], "cancelled");
    EXPECT_FALSE(operations::work_operation_batch(conn, 500, id).worked) << "no batch after the cancel";
    EXPECT_EQ(work_all(id), 0);

    const json status = show(id);
    EXPECT_EQ(status["state"], "cancelled");
    EXPECT_EQ(status["total"], 2500);
    EXPECT_EQ(status["done"], 1000);
    EXPECT_EQ(status["failed"], 0);
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE status = 'DISCARDED'"), 1000);
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE status = 'REVIEW_REQUIRED'"), 1500);
    EXPECT_EQ(count("SELECT count(*) FROM outbox_discard"), 1000);
    EXPECT_EQ(count("SELECT count(*) FROM audit_event WHERE action = 'outbox.discard'"), 1000);
    EXPECT_EQ(count("SELECT count(*) FROM audit_event WHERE action = 'outbox.operation_cancel'"), 1);

    // Cancelling again, or a finished job, changes nothing.
    res = post("/api/v1/admin/operations/" + id + "/cancel", json::object(), "c-2", admin_token());
    ASSERT_EQ(res->status, 200) << res->body;
    EXPECT_EQ(json::parse(res->body)["done"], 1000);
    EXPECT_EQ(count("SELECT count(*) FROM audit_event WHERE action = 'outbox.operation_cancel'"), 1);
}

TEST_F(AdminOperations, TheSameKeyAndBodyAnswerTheSameJobAndAnotherBodyIsRefused) {
    review_events(10);
    const auto first = start(body("redrive", {{"last_error_code", "HTTP_422"}}), "idem-1");
    const std::string id = started_id(first);
    const auto again = start(body("redrive", {{"last_error_code", "HTTP_422"}}), "idem-1");
    EXPECT_EQ(started_id(again), id);
    EXPECT_EQ(again->get_header_value("Idempotent-Replayed"), "true");
    const auto other = start(body("discard", {{"last_error_code", "HTTP_422"}}), "idem-1");
    ASSERT_TRUE(other);
    EXPECT_EQ(other->status, 422) << other->body;
    EXPECT_EQ(code_of(other), "IDEMPOTENCY_KEY_REUSED");
    // The same key in another company is that company's own.
    review_events(2, "globex");
    const std::string theirs = started_id(start(body("redrive", {{"last_error_code", "HTTP_422"}}), "idem-1", admin_token("globex")));
    EXPECT_NE(theirs, id);
    EXPECT_EQ(count("SELECT count(*) FROM outbox_operation"), 2);
}

TEST_F(AdminOperations, ACompanyActsOnlyWithinItsCompanyAndSeesOnlyItsJobs) {
    review_events(5);
    review_events(7, "globex");
    const std::string ours = started_id(start(body("redrive", {{"status", "REVIEW_REQUIRED"}}), "scope-1"));
    EXPECT_EQ(show(ours)["total"], 5);
    work_all(ours);
    EXPECT_EQ(show(ours)["done"], 5);
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE company_id = 'globex' AND status = 'REVIEW_REQUIRED'"), 7);

    const std::string globex = admin_token("globex");
    auto res = client().Get("/api/v1/admin/operations/" + ours, bearer(globex));
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 404);
    EXPECT_EQ(code_of(res), "OPERATION_NOT_FOUND");
    const std::string theirs = started_id(start(body("redrive", {{"status", "REVIEW_REQUIRED"}}), "scope-2", globex));
    res = post("/api/v1/admin/operations/" + theirs + "/cancel", json::object(), "c-1", admin_token());
    EXPECT_EQ(res->status, 404);
    EXPECT_EQ(show(theirs, globex)["state"], "running");
    res = client().Get("/api/v1/admin/operations/not-a-uuid", bearer(admin_token()));
    EXPECT_EQ(res->status, 404);
}

TEST_F(AdminOperations, TheListShowsTheCompanysNewestJobsFirstNarrowedByState) {
    review_events(5);
    review_events(2, "globex");
    const std::string done = started_id(start(body("redrive", {{"status", "REVIEW_REQUIRED"}}), "list-1"));
    work_all(done);
    const std::string running = started_id(start(body("cancel", {{"status", "PENDING"}}), "list-2"));
    const std::string theirs = started_id(start(body("discard", {{"status", "REVIEW_REQUIRED"}}), "list-3", admin_token("globex")));
    const auto list = [&](const std::string& query, const std::string& token = {}) {
        return client().Get("/api/v1/admin/operations" + query, bearer(token.empty() ? admin_token() : token));
    };
    const auto ids = [](const httplib::Result& res) {
        std::vector<std::string> out;
        const json answer = json::parse(res->body);
        for (const auto& job : answer.at("operations")) out.push_back(job.at("operation_id"));
        return out;
    };

    auto res = list("");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    EXPECT_EQ(ids(res), (std::vector<std::string>{running, done})) << "newest first, only this company's: " << res->body;
    const json first = json::parse(res->body)["operations"][0];
    EXPECT_EQ(first["action"], "cancel");
    EXPECT_EQ(first["state"], "running");
    EXPECT_EQ(first["total"], 5);
    EXPECT_TRUE(first["finished_at"].is_null());
    EXPECT_EQ(json::parse(res->body)["operations"][1]["done"], 5);
    EXPECT_EQ(res->body.find(kJobReason), std::string::npos) << "a list carries counts, not the operators' reasons";
    EXPECT_EQ(ids(list("?state=running")), std::vector<std::string>{running});
    EXPECT_EQ(ids(list("?state=done")), std::vector<std::string>{done});
    EXPECT_EQ(ids(list("?limit=1")), std::vector<std::string>{running});
    EXPECT_EQ(ids(list("", admin_token("globex"))), std::vector<std::string>{theirs});

    for (const auto& [query, code] : std::vector<std::pair<std::string, std::string>>{
             {"?state=paused", "INVALID_STATE"}, {"?limit=0", "INVALID_LIMIT"}, {"?limit=101", "INVALID_LIMIT"},
             {"?limit=ten", "INVALID_LIMIT"}, {"?colour=red", "INVALID_QUERY"}}) {
        res = list(query);
        ASSERT_TRUE(res);
        EXPECT_EQ(res->status, 400) << query;
        EXPECT_EQ(code_of(res), code) << query;
    }
    for (const char* role : {"HR", "VIEWER"}) {
        res = list("", mint_hs256(token_claims(role, "acme")));
        ASSERT_TRUE(res);
        EXPECT_EQ(res->status, 403) << role;
    }
    EXPECT_EQ(client().Get("/api/v1/admin/operations")->status, 401);
}

TEST_F(AdminOperations, BadBodiesRolesAndKeysAreRefusedWithJsonErrorsAndChangeNothing) {
    review_events(3);
    const json good = body("redrive", {{"last_error_code", "HTTP_422"}});
    const auto expect = [&](const json& b, int status, const std::string& code, const std::string& key = "bad-1") {
        const auto res = start(b, key);
        ASSERT_TRUE(res);
        EXPECT_EQ(res->status, status) << b.dump() << " -> " << res->body;
        EXPECT_EQ(code_of(res), code) << b.dump();
    };
    expect(body("redrive", {{"last_error_code", "HTTP_422"}, {"colour", "red"}}), 400, "INVALID_FILTER");
    json extra = good;
    extra["limit"] = 5;
    expect(extra, 400, "INVALID_BODY");
    expect(body("explode", {{"last_error_code", "HTTP_422"}}), 422, "INVALID_ACTION");
    expect(body("redrive", {{"status", "PENDING"}}), 422, "INVALID_STATUS");
    expect(body("cancel", {{"status", "REVIEW_REQUIRED"}}), 422, "INVALID_STATUS");
    expect(body("discard", {{"status", "COMPLETED"}}), 422, "INVALID_STATUS");
    expect(body("redrive", {{"occurred_before", "yesterday"}}), 422, "INVALID_TIME");
    expect(body("redrive", {{"occurred_after", "2026-02-30T00:00:00Z"}}), 422, "INVALID_TIME");
    expect(body("redrive", {{"occurred_after", "2026-03-01T00:00:00Z"}, {"occurred_before", "2026-02-01T00:00:00Z"}}),
           422, "INVALID_FILTER");
    expect(body("redrive", {{"last_error_code", "HTTP_422"}, {"no_error_code", true}}), 422, "INVALID_FILTER");
    expect(body("redrive", {{"last_error_code", nullptr}}), 422, "INVALID_FILTER");
    expect(body("redrive", {{"event_type", 5}}), 400, "INVALID_FILTER");
    expect(body("redrive", json::object()), 422, "INVALID_FILTER");
    json no_reason = good;
    no_reason.erase("reason");
    expect(no_reason, 422, "INVALID_REASON");
    json terse = good;
    terse["reason"] = "short";
    expect(terse, 422, "INVALID_REASON");
    terse["reason"] = std::string(301, 'x');
    expect(terse, 422, "INVALID_REASON");
    json dry = good;
    dry["dry_run"] = "yes";
    expect(dry, 400, "INVALID_BODY");
    expect(good, 400, "MISSING_IDEMPOTENCY_KEY", "");
    const auto malformed = client().Post("/api/v1/admin/operations",
                                         {{"Authorization", "Bearer " + admin_token()}, {"Idempotency-Key", "m-1"}},
                                         "{not json", "application/json");
    EXPECT_EQ(malformed->status, 400);
    for (const char* role : {"HR", "VIEWER", "PLATFORM_ADMIN"}) {
        const auto res = start(good, "r-1", mint_hs256(token_claims(role, "acme")));
        ASSERT_TRUE(res);
        EXPECT_EQ(res->status, 403) << role;
    }
    EXPECT_EQ(client().Post("/api/v1/admin/operations", good.dump(), "application/json")->status, 401);
    EXPECT_EQ(count("SELECT count(*) FROM outbox_operation"), 0);
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE status = 'REVIEW_REQUIRED'"), 3);
}

TEST_F(AdminOperations, AJobLeftMidBatchByADeadHostIsFinishedByAnotherExactlyOnce) {
    review_events(1200);
    const std::string id = started_id(start(body("redrive", {{"last_error_code", "HTTP_422"}}), "dead-1"));
    // The dying host's batch stops inside its transaction, after it changed its events and
    // before it recorded them, until the server cuts its connection.
    db_.exec(R"SQL(
CREATE FUNCTION test_hang() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('application_name') = 'dying-host' THEN PERFORM pg_sleep(120); END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER test_hang BEFORE INSERT ON outbox_manual_retry FOR EACH STATEMENT EXECUTE FUNCTION test_hang();
)SQL");
    std::atomic<bool> died{false};
    std::thread dying([&] {
        try {
            pqxx::connection conn(db_.url());
            pqxx::nontransaction(conn).exec("SET application_name = 'dying-host'");
            operations::work_operation_batch(conn, 500, id);
        } catch (const std::exception&) {
            died = true;
        }
    });
    ASSERT_TRUE(wait_until([&] {
        return count("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'dying-host' AND wait_event = 'PgSleep'") == 1;
    }, 20s));
    // Meanwhile another host never takes the batch the dying one holds.
    pqxx::connection other(db_.url());
    EXPECT_FALSE(operations::work_operation_batch(other, 500, id).worked);
    EXPECT_FALSE(operations::work_operation_batch(other, 500).worked);

    db_.exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'dying-host'");
    dying.join();
    EXPECT_TRUE(died);
    EXPECT_EQ(show(id)["done"], 0) << "the dead host's batch left nothing behind";
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE status = 'PENDING'"), 0);

    EXPECT_EQ(work_all(id), 3);
    const json status = show(id);
    EXPECT_EQ(status["state"], "done");
    EXPECT_EQ(status["done"], 1200);
    EXPECT_EQ(status["failed"], 0);
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE status = 'PENDING' AND version = 5"), 1200);
    EXPECT_EQ(count("SELECT count(*) FROM outbox_manual_retry"), 1200);
    EXPECT_EQ(count("SELECT count(DISTINCT event_id) FROM outbox_manual_retry"), 1200);
    EXPECT_EQ(count("SELECT count(*) FROM audit_event WHERE action = 'outbox.manual_retry'"), 1200);
}

TEST_F(AdminOperations, EventsAnotherTransactionHoldsAreCountedFailedAndLeftAlone) {
    review_events(10);
    const std::string id = started_id(start(body("cancel", {{"status", "PENDING"}, {"event_type", "TestRequested"}}), "held-1"));
    // No PENDING events when it started: nothing to do.
    work_all(id);
    EXPECT_EQ(show(id)["state"], "done");
    EXPECT_EQ(show(id)["total"], 0);

    db_.exec("UPDATE event_publication SET status = 'PENDING', last_error_code = NULL, attempt_count = 0");
    const std::string second = started_id(start(body("cancel", {{"status", "PENDING"}}), "held-2"));
    pqxx::connection holder(db_.url());
    pqxx::work hold(holder);
    const std::string held =
        hold.exec1("SELECT event_id::text FROM event_publication ORDER BY occurred_at, event_id LIMIT 1 FOR UPDATE")[0]
            .as<std::string>();
    work_all(second);
    hold.abort();
    const json status = show(second);
    EXPECT_EQ(status["state"], "done");
    EXPECT_EQ(status["total"], 10);
    EXPECT_EQ(status["done"], 9);
    EXPECT_EQ(status["failed"], 1);
    EXPECT_EQ(db_.scalar("SELECT status FROM event_publication WHERE event_id = '" + held + "'"), "PENDING");
    EXPECT_EQ(count("SELECT count(*) FROM audit_event WHERE action = 'outbox.cancel'"), 9);
}

}  // namespace
}  // namespace outbox::test
