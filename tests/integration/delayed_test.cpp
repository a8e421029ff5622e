// Delayed events against a real PostgreSQL and a real host: outbox_publish(...,
// deliver_after => timestamptz) stores the event at once, no host claims it before its time,
// it runs soon after, and the later events of its aggregate wait for it. Old 3- to 5-argument
// calls (positional and named) keep working, and so does the C++ publisher.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <map>
#include <optional>
#include <thread>

#include <pqxx/pqxx>

#include "operations/event_query.hpp"
#include "support/ordered_recorder.hpp"
#include "outbox/publisher.hpp"
#include "support/pg_fixture.hpp"
#include "support/temp_dir.hpp"
#include "support/test_host.hpp"

namespace outbox::test {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

class Delayed : public ::testing::Test {
protected:
    std::string scalar(const std::string& sql) const { return db_.scalar(sql); }
    std::string of(const std::string& id, const std::string& expression) const {
        return scalar("SELECT (" + expression + ")::text FROM event_publication WHERE event_id = '" + id + "'");
    }

    /// Publishes one OrderedStep event in its own transaction; `delay` is SQL added to now()
    /// for deliver_after, empty for none; empty key: no aggregate.
    std::string publish(const std::string& key, const std::string& delay = "") const {
        pqxx::connection conn(db_.url());
        pqxx::work tx(conn);
        const std::string sql = delay.empty()
                                    ? "SELECT outbox_publish('acme', 'OrderedStep', '{}'::jsonb, $1)::text"
                                    : "SELECT outbox_publish('acme', 'OrderedStep', '{}'::jsonb, $1, "
                                      "deliver_after => now() + " + delay + ")::text";
        const auto id =
            tx.exec_params1(sql, key.empty() ? std::optional<std::string>() : std::optional<std::string>(key))[0]
                .as<std::string>();
        tx.commit();
        return id;
    }

    std::unique_ptr<TestHost> start_host() const { return start_ordered_recorder(fast_options(db_.url(), "h1"), record_); }
    std::map<std::string, std::vector<std::string>> starts() const { return ordered_starts(record_); }

    /// Until the database's clock passes `id`'s deliver_after, checks every 50 ms that the
    /// event, and `waiting` when given, are still PENDING and were never claimed; false at
    /// the first check that fails. A check after the time proves nothing and passes.
    bool untouched_until_due(const std::string& id, const std::string& waiting = "") const {
        const std::string ids = "'" + id + "'" + (waiting.empty() ? "" : ", '" + waiting + "'");
        while (true) {
            const auto row = db_.exec(
                "SELECT now() >= (SELECT deliver_after FROM event_publication WHERE event_id = '" + id + "'), "
                "bool_and(status = 'PENDING' AND attempt_count = 0 AND version = 1) "
                "FROM event_publication WHERE event_id IN (" + ids + ")");
            if (row[0][0].as<bool>()) return true;
            if (!row[0][1].as<bool>()) return false;
            std::this_thread::sleep_for(50ms);
        }
    }

    TestDatabase db_;
    TempDir dir_;
    std::filesystem::path record_ = dir_.path() / "starts.txt";
};

TEST_F(Delayed, ADelayedEventIsNotClaimedBeforeItsTimeAndRunsSoonAfter) {
    const auto host = start_host();
    const auto delayed = publish("", "interval '3 seconds'");
    const auto prompt = publish("");
    EXPECT_EQ(of(delayed, "next_attempt_at = deliver_after"), "true") << "due exactly when the publisher asked";
    ASSERT_TRUE(wait_until([&] { return of(prompt, "status") == "COMPLETED"; }, 20s))
        << "the host runs an event published after the delayed one at once";
    EXPECT_TRUE(untouched_until_due(delayed)) << "a host claimed the delayed event before its time";
    ASSERT_TRUE(wait_until([&] { return of(delayed, "status") == "COMPLETED"; }, 20s));
    EXPECT_EQ(of(delayed, "attempt_count"), "1");
    EXPECT_EQ(of(delayed, "completed_at >= deliver_after"), "true") << "it ran before its time";
    // Typically 100-200 ms (one poll); 5 s leaves room for a loaded machine.
    EXPECT_EQ(of(delayed, "completed_at < deliver_after + interval '5 seconds'"), "true")
        << "it ran within a few polls (100 ms here) of its time: " << of(delayed, "completed_at - deliver_after");
}

TEST_F(Delayed, ALaterEventOfTheSameAggregateWaitsForTheDelayedHead) {
    const auto head = publish("order-1", "interval '3 seconds'");
    const auto next = publish("order-1");
    const auto other = publish("order-2");
    {
        pqxx::connection conn(db_.url());
        const auto event = operations::EventQuery(conn).get("acme", next);
        ASSERT_TRUE(event.has_value());
        EXPECT_EQ((*event)["blocked_by"], nlohmann::json(head)) << "the event view names the delayed head";
    }
    const auto host = start_host();
    ASSERT_TRUE(wait_until([&] { return of(other, "status") == "COMPLETED"; }, 20s))
        << "another aggregate is not held back";
    EXPECT_TRUE(untouched_until_due(head, next)) << "the successor or the head ran before the head's time";
    ASSERT_TRUE(wait_until([&] { return of(next, "status") == "COMPLETED"; }, 20s));
    EXPECT_EQ(starts()["order-1"], (std::vector<std::string>{head, next})) << "the delayed head runs first";
    EXPECT_EQ(of(next, "completed_at >= (SELECT deliver_after FROM event_publication WHERE event_id = '" + head + "')"),
              "true");
}

TEST_F(Delayed, OldPositionalAndNamedCallsOfOutboxPublishStillWork) {
    const std::vector<std::string> calls{
        "outbox_publish('acme', 'OrderedStep', '{}')",
        "outbox_publish('acme', 'OrderedStep', '{}', 'k-1')",
        "outbox_publish('acme', 'OrderedStep', '{}', 'k-1', 'd-1')",
        "outbox_publish('acme', 'OrderedStep', '{}'::jsonb, NULL::text, NULL::text)",
        "outbox_publish(p_company_id => 'acme', p_event_type => 'OrderedStep', p_payload => '{}')",
        "outbox_publish('acme', 'OrderedStep', '{}', p_dedup_key => 'd-2')",
        "outbox_publish('acme', 'OrderedStep', '{}', p_aggregate_key => 'k-2', p_dedup_key => 'd-3')",
    };
    pqxx::connection conn(db_.url());
    // The way publishers of earlier releases call it: a prepared five-parameter statement.
    conn.prepare("old_publish", "SELECT outbox_publish($1, $2, $3::jsonb, $4, $5)::text");
    for (const auto& call : calls) {
        pqxx::work tx(conn);
        EXPECT_NO_THROW(tx.exec1("SELECT " + call + "::text")) << call;
        tx.commit();
    }
    {
        pqxx::work tx(conn);
        EXPECT_NO_THROW(tx.exec_prepared1("old_publish", "acme", "OrderedStep", "{}", "k-3", "d-4"));
        tx.commit();
    }
    EXPECT_EQ(scalar("SELECT count(*) FROM event_publication"), "8");
    EXPECT_EQ(scalar("SELECT count(*) FROM event_publication WHERE deliver_after IS NULL AND next_attempt_at <= now() "
                     "AND status = 'PENDING'"),
              "8")
        << "calls without deliver_after are due at once, as before";
    EXPECT_EQ(scalar("SELECT count(*) FROM pg_proc WHERE proname = 'outbox_publish'"), "1")
        << "one function: a second overload would make these calls ambiguous";
    EXPECT_EQ(scalar("SELECT prosecdef::text || ' ' || array_to_string(proconfig, ';') FROM pg_proc "
                     "WHERE proname = 'outbox_publish'"),
              "true search_path=public, pg_temp");
}

TEST_F(Delayed, DeliverAfterIsStoredAndTimesInThePastAreDueAtOnce) {
    const auto later = publish("", "interval '1 hour'");
    EXPECT_EQ(of(later, "deliver_after = occurred_at + interval '1 hour'"), "true");
    EXPECT_EQ(of(later, "next_attempt_at = deliver_after AND status = 'PENDING'"), "true");
    const auto past = publish("", "interval '-1 hour'");
    EXPECT_EQ(of(past, "deliver_after = occurred_at - interval '1 hour'"), "true") << "kept as asked";
    EXPECT_EQ(of(past, "next_attempt_at = occurred_at"), "true") << "due at once, not ahead of events before it";
    EXPECT_EQ(of(publish("", "interval '1 year'"), "status"), "PENDING") << "exactly one year ahead is allowed";
}

TEST_F(Delayed, RefusesInfiniteTimesAndTimesMoreThanAYearAhead) {
    const std::vector<std::pair<std::string, std::string>> cases{
        {"'infinity'::timestamptz", "deliver_after must be a finite time"},
        {"'-infinity'::timestamptz", "deliver_after must be a finite time"},
        {"now() + interval '1 year 1 second'", "deliver_after is more than 1 year ahead"},
    };
    for (const auto& [value, message] : cases) {
        pqxx::connection conn(db_.url());
        pqxx::work tx(conn);
        try {
            tx.exec("SELECT outbox_publish('acme', 'OrderedStep', '{}', deliver_after => " + value + ")");
            ADD_FAILURE() << "accepted " << value;
        } catch (const pqxx::sql_error& e) {
            EXPECT_EQ(e.sqlstate(), "22023") << value;
            EXPECT_THAT(e.what(), HasSubstr(message)) << value;
        }
    }
    EXPECT_EQ(scalar("SELECT count(*) FROM event_publication"), "0");
}

TEST_F(Delayed, CppPublisherDeliverAfterDelaysTheEvent) {
    static const sdk::PayloadSchema kSchema{{"step", sdk::FieldKind::Integer}};
    const auto at = std::chrono::system_clock::now() + 2h;
    pqxx::connection conn(db_.url());
    pqxx::work tx(conn);
    sdk::SafePayload payload{kSchema};
    payload.set("step", 1);
    const auto delayed = sdk::publish(tx, "acme", "OrderedStep", payload, {.aggregate_key = "k", .deliver_after = at});
    const auto prompt = sdk::publish(tx, "acme", "OrderedStep", payload);
    tx.commit();
    const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(at.time_since_epoch()).count();
    EXPECT_EQ(of(delayed, "(extract(epoch FROM deliver_after) * 1000000)::bigint"), std::to_string(micros))
        << "stored to the microsecond";
    EXPECT_EQ(of(delayed, "next_attempt_at = deliver_after AND aggregate_key = 'k'"), "true");
    EXPECT_EQ(of(prompt, "deliver_after IS NULL AND next_attempt_at <= now()"), "true");
}

}  // namespace
}  // namespace outbox::test
