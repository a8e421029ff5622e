// Replay and backfill (operator jobs with action "replay"): COMPLETED or DISCARDED events are
// run again by one named handler only, which Context::replay() tells; each event is recorded
// and audited with the reason; a replay goes at its handler's pace, never more than one
// batch of replayed events waiting; and what a replay cannot do is refused before anything
// changes. Real hosts (app::Host with the scripted fixtures), the admin API, PostgreSQL.
#include <gtest/gtest.h>

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

const std::string kReplayReason = "handler fixed in release 1.4.2";
// Both scripted handlers take TestRequested and write one effect row each.
constexpr const char* kBothWrite = R"({"db": true, "b_db": true})";

class Replay : public AdminApi {
protected:
    void SetUp() override {
        AdminApi::SetUp();
        create_scripted_effect_table(db_.url());
    }

    std::unique_ptr<TestHost> start_host(const std::string& id) {
        auto host = std::make_unique<TestHost>(fast_options(db_.url(), id),
                                               std::vector<std::string>{OUTBOX_FIXTURE_SCRIPTED, OUTBOX_FIXTURE_SCRIPTED_B});
        host->start();
        return host;
    }
    httplib::Result start(const json& body, const std::string& key, const std::string& company = "acme") {
        auto headers = bearer(admin_token(company));
        if (!key.empty()) headers.emplace("Idempotency-Key", key);
        return client().Post("/api/v1/admin/operations", headers, body.dump(), "application/json");
    }
    json show(const std::string& id) {
        const auto res = client().Get("/api/v1/admin/operations/" + id, bearer(admin_token()));
        EXPECT_TRUE(res);
        return res ? json::parse(res->body) : json{};
    }
    static json replay_body(const std::string& handler, const json& filter, bool dry_run = false) {
        return {{"action", "replay"}, {"filter", filter}, {"handler", handler}, {"reason", kReplayReason},
                {"dry_run", dry_run}};
    }
    static std::string code_of(const httplib::Result& res) {
        return res ? json::parse(res->body)["error"]["code"].get<std::string>() : "no answer";
    }
    long long effects(const std::string& handler_name) {
        return count("SELECT count(*) FROM scripted_effect WHERE handler_name = '" + handler_name + "'");
    }
    bool all_completed() {
        return count("SELECT count(*) FROM event_publication WHERE status <> 'COMPLETED' AND status <> 'DISCARDED'") == 0;
    }
};

TEST_F(Replay, OnlyTheNamedHandlerRunsAgainSeesItIsAReplayAndEachEventIsRecordedAndAudited) {
    auto host = start_host("replay-a");
    publish_many(db_.url(), "TestRequested", kBothWrite, 30);
    publish_many(db_.url(), "TestRequested", kBothWrite, 5, "globex");
    ASSERT_TRUE(wait_until([&] { return effects("scripted") == 35 && effects("scripted-b") == 35 && all_completed(); },
                           30s));
    // One of acme's events was discarded after it completed: a replay takes it too.
    db_.exec("UPDATE event_publication SET status = 'DISCARDED' WHERE event_id = (SELECT event_id FROM "
             "event_publication WHERE company_id = 'acme' ORDER BY occurred_at, event_id LIMIT 1)");
    // Completions that wrote no consumption rows (a single pass over every handler writes
    // none): what the replay marks consumed is then its own doing.
    db_.exec("DELETE FROM event_consumption");
    const std::string globex_before =
        db_.scalar("SELECT string_agg(event_id || status || version, ',' ORDER BY event_id) FROM event_publication "
                   "WHERE company_id = 'globex'");

    auto res = start(replay_body("scripted-b", {{"event_type", "TestRequested"}}, true), "");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    EXPECT_EQ(json::parse(res->body)["count"], 30) << "acme's events only, the discarded one included";
    EXPECT_EQ(effects("scripted-b+replay"), 0) << "a dry run changes nothing";

    res = start(replay_body("scripted-b", {{"event_type", "TestRequested"}}), "replay-1");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 202) << res->body;
    const std::string id = json::parse(res->body)["operation_id"];
    ASSERT_TRUE(wait_until([&] { return show(id)["state"] == "done" && all_completed(); }, 30s)) << show(id).dump();
    EXPECT_EQ(show(id)["done"], 30);

    EXPECT_EQ(effects("scripted-b+replay"), 30) << "scripted-b ran again for each of acme's events, told it is a replay";
    EXPECT_EQ(effects("scripted-b"), 35) << "its first deliveries were not replays";
    EXPECT_EQ(effects("scripted"), 35) << "the handler not named is not called again";
    EXPECT_EQ(count("SELECT count(*) FROM event_consumption c JOIN event_publication e USING (event_id) "
                    "WHERE e.company_id = 'acme' AND c.handler_name = 'scripted'"),
              30)
        << "the other handler is marked consumed, so hosts of earlier releases skip it too";
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE company_id = 'acme' AND status = 'COMPLETED' "
                    "AND replay_handler = 'scripted-b'"),
              30);
    EXPECT_EQ(db_.scalar("SELECT string_agg(event_id || status || version, ',' ORDER BY event_id) FROM "
                         "event_publication WHERE company_id = 'globex'"),
              globex_before)
        << "another company's events are not touched";
    EXPECT_EQ(count("SELECT count(*) FROM outbox_manual_retry WHERE reason = '" + kReplayReason + "'"), 30);
    EXPECT_EQ(count("SELECT count(*) FROM audit_event WHERE action = 'outbox.replay' AND company_id = 'acme' "
                    "AND detail ->> 'handler' = 'scripted-b' AND detail ->> 'operation_id' = '" + id + "'"),
              30);
    EXPECT_EQ(count("SELECT count(*) FROM audit_event WHERE action = 'outbox.operation_start' AND target_id = '" + id +
                    "' AND detail ->> 'handler' = 'scripted-b'"),
              1);
    EXPECT_TRUE(host->stop());
}

TEST_F(Replay, AReplayGoesAtItsHandlersPaceWithNoMoreThanOneBatchWaiting) {
    constexpr int kEvents = 1200;
    {
        auto host = start_host("pace-a");
        publish_many(db_.url(), "TestRequested", kBothWrite, kEvents);
        ASSERT_TRUE(wait_until([&] { return effects("scripted") == kEvents && all_completed(); }, 60s));
        EXPECT_TRUE(host->stop());
    }
    // No host runs the handlers now: only the job's runner works.
    const auto res = start(replay_body("scripted", {{"status", "COMPLETED"}}), "pace-1");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 202) << res->body;
    const std::string id = json::parse(res->body)["operation_id"];
    db::OutageLog outage;
    std::jthread runner([&](std::stop_token stop) {
        operations::OperationRunner(db_.url(), outage, 50ms, operations::kOperationBatchSize).run(stop);
    });
    ASSERT_TRUE(wait_until([&] { return show(id)["done"] == operations::kOperationBatchSize; }, 30s)) << show(id).dump();
    // Several of the runner's looks (every 200 ms while a replay waits): none takes a batch.
    std::this_thread::sleep_for(1500ms);
    json status = show(id);
    EXPECT_EQ(status["state"], "running");
    EXPECT_EQ(status["done"], operations::kOperationBatchSize) << "one batch waits for its handler, no second one";
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE status = 'PENDING' AND replay_handler = 'scripted'"),
              operations::kOperationBatchSize);

    // A host runs the handler: the replay proceeds as it finishes them.
    auto host = start_host("pace-b");
    ASSERT_TRUE(wait_until([&] { return show(id)["state"] == "done" && all_completed(); }, 60s)) << show(id).dump();
    runner.request_stop();
    status = show(id);
    EXPECT_EQ(status["done"], kEvents);
    EXPECT_EQ(status["failed"], 0);
    EXPECT_EQ(effects("scripted+replay"), kEvents);
    EXPECT_EQ(effects("scripted-b+replay"), 0);
    EXPECT_EQ(effects("scripted-b"), kEvents);
    EXPECT_TRUE(host->stop());
}

TEST_F(Replay, WhatAReplayCannotDoIsRefusedAndChangesNothing) {
    publish_many(db_.url(), "TestRequested", "{}", 3);
    db_.exec("UPDATE event_publication SET status = 'COMPLETED', completed_at = now(), version = 3");
    const auto refused = [&](const json& body, int status, const std::string& code) {
        const auto res = start(body, "bad-1");
        ASSERT_TRUE(res);
        EXPECT_EQ(res->status, status) << body.dump() << " -> " << res->body;
        EXPECT_EQ(code_of(res), code) << body.dump() << " -> " << res->body;
    };
    json no_handler = replay_body("x", {{"status", "COMPLETED"}});
    no_handler.erase("handler");
    refused(no_handler, 422, "INVALID_HANDLER");
    refused(replay_body("Not A Name", {{"status", "COMPLETED"}}), 422, "INVALID_HANDLER");
    refused(replay_body("scripted", {{"handler", "scripted"}}), 422, "INVALID_FILTER");
    refused(replay_body("scripted", {{"status", "REVIEW_REQUIRED"}}), 422, "INVALID_STATUS");
    refused(replay_body("scripted", {{"status", "COMPLETED"}}), 422, "UNKNOWN_HANDLER");
    json redrive = replay_body("scripted", {{"status", "REVIEW_REQUIRED"}});
    redrive["action"] = "redrive";
    refused(redrive, 422, "INVALID_BODY");

    // A host registers the handlers; then a live host of a release before replay appears.
    start_host("new-a")->stop();
    db_.exec("UPDATE outbox_host SET stopped_at = NULL, last_heartbeat_at = now(), schema_needed = 25, "
             "version = '0.2.0'");
    refused(replay_body("scripted", {{"status", "COMPLETED"}}), 422, "HOSTS_TOO_OLD");
    EXPECT_EQ(count("SELECT count(*) FROM outbox_operation"), 0);
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE status = 'COMPLETED' AND version = 3"), 3);
    EXPECT_EQ(count("SELECT count(*) FROM audit_event"), 0);
}

}  // namespace
}  // namespace outbox::test
