// Every attempt on record (outbox_attempt): one row per handler call, written by the
// statement that stores the attempt's outcome (or the fence of the handler's own
// transaction), one per lost host by the rescue, as outbox.attempt_history chooses; shown
// by the admin API in the company's view; kept in time partitions that retention drops
// whole. Real hosts (app::Host with the scripted fixtures), the admin API, PostgreSQL.
#include <gtest/gtest.h>

#include <pqxx/pqxx>

#include "admin_support.hpp"
#include "lease/retention.hpp"
#include "support/test_host.hpp"

namespace outbox::test {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

class AttemptHistory : public AdminApi {
protected:
    void SetUp() override {
        AdminApi::SetUp();
        create_scripted_effect_table(db_.url());
    }
    std::string publish_one(const std::string& payload, const std::string& company = "acme") const {
        return publish_many(db_.url(), "TestRequested", payload, 1, company).front();
    }
    /// "attempt:handler:outcome:code" per row, by attempt and handler.
    std::string rows_of(const std::string& id) const {
        return db_.scalar("SELECT coalesce(string_agg(attempt || ':' || coalesce(handler, '-') || ':' || outcome || ':' || "
                          "coalesce(error_code, '-'), ' ' ORDER BY attempt, handler), '') FROM outbox_attempt "
                          "WHERE event_id = '" + id + "'");
    }
    bool completed(const std::string& id) const {
        return db_.scalar("SELECT status FROM event_publication WHERE event_id = '" + id + "'") == "COMPLETED";
    }
    json attempts_via_api(const std::string& id, const std::string& company, int& status) {
        const auto res = client().Get("/api/v1/admin/outbox-events/" + id + "/attempts", bearer(admin_token(company)));
        status = res ? res->status : 0;
        if (res && res->status != 200) return json::parse(res->body);
        return res ? json::parse(res->body) : json{};
    }
};

// Two handlers take the event; "scripted" fails twice, "scripted-b" succeeds in the first
// attempt (and is skipped after): four calls, each with its outcome, code, host and times, and
// a retry's due time on the failures that were retried.
TEST_F(AttemptHistory, EveryCallOfEveryAttemptIsRecordedWithItsOutcomeAndTheApiShowsIt) {
    const std::string flaky = publish_one(R"({"fail_times": 2})");
    const std::string rejected = publish_one(R"({"mode": "review"})");
    TestHost host(fast_options(db_.url(), "h1"), {OUTBOX_FIXTURE_SCRIPTED, OUTBOX_FIXTURE_SCRIPTED_B});
    host.start();
    ASSERT_TRUE(wait_until([&] {
        return completed(flaky) &&
               db_.scalar("SELECT status FROM event_publication WHERE event_id = '" + rejected + "'") == "REVIEW_REQUIRED";
    }, 30s));
    host.stop();
    EXPECT_EQ(rows_of(flaky),
              "1:scripted:retry:SCRIPTED_FLAKY 1:scripted-b:succeeded:- 2:scripted:retry:SCRIPTED_FLAKY "
              "3:scripted:succeeded:-");
    EXPECT_EQ(rows_of(rejected), "1:scripted:review_required:HTTP_422 1:scripted-b:succeeded:-");
    EXPECT_EQ(count("SELECT count(*) FROM outbox_attempt WHERE host <> 'h1' OR company_id <> 'acme' OR "
                    "started_at > ended_at OR ended_at > now()"),
              0);
    EXPECT_EQ(count("SELECT count(*) FROM outbox_attempt WHERE (outcome = 'retry') <> (retry_after IS NOT NULL)"), 0)
        << "a retried failure says when its retry was due; nothing else does";

    int status = 0;
    const json answer = attempts_via_api(flaky, "acme", status);
    ASSERT_EQ(status, 200) << answer.dump();
    ASSERT_EQ(answer["attempts"].size(), 4u) << answer.dump();
    const json& first = answer["attempts"][0];
    for (const char* key : {"attempt", "handler", "host", "started_at", "ended_at", "outcome", "error_code", "retry_after"}) {
        EXPECT_TRUE(first.contains(key)) << key;
    }
    EXPECT_EQ(first["attempt"], 1);
    EXPECT_TRUE(first["host"].is_null()) << "host names are the platform's, not the company's";
    EXPECT_EQ(answer["attempts"][3]["outcome"], "succeeded");
    EXPECT_TRUE(answer["attempts"][3]["error_code"].is_null());
    EXPECT_EQ(attempts_via_api(flaky, "globex", status)["error"]["code"], "EVENT_NOT_ACCESSIBLE");
    EXPECT_EQ(status, 403) << "another company's event answers like a missing one";
    EXPECT_EQ(attempts_via_api("01a24f79-7039-769e-b9f4-a6b635912682", "acme", status)["error"]["code"],
              "EVENT_NOT_ACCESSIBLE");
    EXPECT_EQ(status, 403);
}

// The last handler completes the event in its own transaction: no outcome goes to the
// completer, so its fence writes the attempt's rows with the completion: its own call's and
// the earlier handler's, once each.
TEST_F(AttemptHistory, ACompletionInTheHandlersTransactionWritesTheAttemptsRowsInThatTransaction) {
    const std::string id = publish_one(R"({"db": true, "b_db": true})");
    TestHost host(fast_options(db_.url(), "h1"), {OUTBOX_FIXTURE_SCRIPTED, OUTBOX_FIXTURE_SCRIPTED_B});
    host.start();
    ASSERT_TRUE(wait_until([&] { return completed(id); }, 20s));
    host.stop();
    EXPECT_EQ(rows_of(id), "1:scripted:succeeded:- 1:scripted-b:succeeded:-");
    EXPECT_EQ(count("SELECT count(*) FROM scripted_effect WHERE event_id = '" + id + "'"), 2);
}

// A host that died mid-attempt: the rescue that retries the event records the lost attempt
// (the lost host, no handler, from its claim to the rescue); the retry is recorded as usual.
TEST_F(AttemptHistory, ALostHostsAttemptIsRecordedByTheRescueThatRetriesIt) {
    const std::string id = publish_one("{}");
    db_.exec("UPDATE event_publication SET status = 'PROCESSING', attempt_count = 1, lease_owner = 'gone:42', "
             "lease_token = gen_random_uuid(), lease_expires_at = now() - interval '1 second', "
             "updated_at = now() - interval '1 minute' WHERE event_id = '" + id + "'");
    TestHost host(fast_options(db_.url(), "h1"), {OUTBOX_FIXTURE_SCRIPTED});
    host.start();
    ASSERT_TRUE(wait_until([&] { return completed(id); }, 30s));
    host.stop();
    EXPECT_EQ(rows_of(id), "1:-:worker_lost:WORKER_LOST 2:scripted:succeeded:-");
    EXPECT_EQ(db_.scalar("SELECT host || ' ' || (ended_at - started_at >= interval '59 seconds') FROM outbox_attempt "
                         "WHERE event_id = '" + id + "' AND attempt = 1"),
              "gone:42 true");
}

// outbox.attempt_history: "failures" keeps the calls that did not succeed, "off" none.
TEST_F(AttemptHistory, TheSettingChoosesWhatIsKept) {
    const std::string with_failures = publish_one(R"({"fail_times": 1})");
    auto options = fast_options(db_.url(), "h1");
    options.attempt_history = "failures";
    {
        TestHost host(options, {OUTBOX_FIXTURE_SCRIPTED});
        host.start();
        ASSERT_TRUE(wait_until([&] { return completed(with_failures); }, 20s));
        host.stop();
    }
    EXPECT_EQ(rows_of(with_failures), "1:scripted:retry:SCRIPTED_FLAKY");
    const std::string without = publish_one(R"({"fail_times": 1, "db": true})");
    options.attempt_history = "off";
    {
        TestHost host(options, {OUTBOX_FIXTURE_SCRIPTED});
        host.start();
        ASSERT_TRUE(wait_until([&] { return completed(without); }, 20s));
        host.stop();
    }
    EXPECT_EQ(rows_of(without), "");
}

// Partitions of outbox.history_partition cover the time ahead; retention drops whole ones;
// a row written before its partition existed moves into it; an old stray row is deleted.
TEST_F(AttemptHistory, PartitionsAreCreatedAheadAndDroppedWholeAndStrayRowsMoveIn) {
    pqxx::connection conn{db_.url()};
    const std::string t0 = db_.scalar("SELECT now()::text");
    const auto insert_at = [&](const std::string& at) {
        db_.exec("INSERT INTO outbox_attempt (event_id, company_id, attempt, handler, host, started_at, ended_at, outcome) "
                 "VALUES (gen_random_uuid(), 'acme', 1, 'scripted', 'h1', '" + at + "', '" + at + "', 'succeeded')");
    };
    insert_at(t0);
    insert_at(db_.scalar("SELECT ('" + t0 + "'::timestamptz - interval '1 day')::text"));
    ASSERT_EQ(count("SELECT count(*) FROM outbox_attempt_default"), 2);
    const lease::Retention retention(std::chrono::minutes{5}, lease::Retention::kBatch, std::chrono::minutes{1});

    const auto first = retention.maintain_partitions(conn, t0);
    ASSERT_TRUE(first);
    EXPECT_EQ(first->created, 12) << "the minute before now's, now's, and the ten after it";
    EXPECT_EQ(first->moved, 1) << "the row of a range that had no partition moves into it";
    EXPECT_EQ(first->deleted, 1) << "a stray row older than the retention goes";
    EXPECT_EQ(count("SELECT count(*) FROM outbox_attempt_default"), 0);
    EXPECT_EQ(count("SELECT count(*) FROM outbox_attempt"), 1);
    EXPECT_EQ(db_.scalar("SELECT tableoid::regclass::text <> 'outbox_attempt_default' FROM outbox_attempt"), "t");

    const auto again = retention.maintain_partitions(conn, t0);
    ASSERT_TRUE(again);
    EXPECT_EQ(again->created, 0) << "nothing twice";

    const std::string later = db_.scalar("SELECT ('" + t0 + "'::timestamptz + interval '20 minutes')::text");
    const auto after = retention.maintain_partitions(conn, later);
    ASSERT_TRUE(after);
    EXPECT_EQ(after->dropped, 12) << "every partition that ended over 5 minutes before";
    EXPECT_EQ(count("SELECT count(*) FROM outbox_attempt"), 0) << "its rows left with it, none deleted one by one";
    EXPECT_EQ(count("SELECT count(*) FROM outbox_attempt_partition WHERE upper_at <= '" + later +
                    "'::timestamptz - interval '5 minutes'"),
              0);
    EXPECT_EQ(count("SELECT count(*) FROM pg_class WHERE relname LIKE 'outbox\\_attempt\\_2%' AND relkind = 'r' AND relispartition"),
              count("SELECT count(*) FROM outbox_attempt_partition"));

    // A width or ahead the function does not take is refused, not obeyed.
    EXPECT_THROW(db_.exec("SELECT * FROM outbox_attempt_maintain(interval '1 second', interval '1 hour', "
                          "interval '1 hour')"),
                 std::exception);
}

}  // namespace
}  // namespace outbox::test
