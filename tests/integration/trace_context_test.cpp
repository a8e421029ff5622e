// W3C trace context from the publishing transaction to the handler, against a real
// PostgreSQL and a real host: outbox_publish() stores a valid traceparent (and tracestate)
// given as arguments or by the transaction's outbox.traceparent / outbox.tracestate
// settings, drops a malformed one without failing the publish, and the handler reads the
// stored pair from ctx.trace(). The C++ publisher passes it too.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <optional>

#include <pqxx/pqxx>

#include "outbox/publisher.hpp"
#include "support/pg_fixture.hpp"
#include "support/temp_dir.hpp"
#include "support/test_host.hpp"

namespace outbox::test {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

constexpr const char* kParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
constexpr const char* kOtherParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00";
constexpr const char* kState = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7";

class TraceContext : public ::testing::Test {
protected:
    /// Runs `statements` and then `publish_call` (a SELECT of one event id) in one
    /// transaction; returns the id.
    std::string publish(const std::string& publish_call, const std::string& statements = "") const {
        pqxx::connection conn(db_.url());
        pqxx::work tx(conn);
        if (!statements.empty()) tx.exec(statements);
        const auto id = tx.exec1("SELECT (" + publish_call + ")::text")[0].as<std::string>();
        tx.commit();
        return id;
    }
    /// "<traceparent>|<tracestate>" as stored, NULL shown as "-".
    std::string stored(const std::string& id) const {
        return db_.scalar("SELECT coalesce(traceparent, '-') || '|' || coalesce(tracestate, '-') "
                          "FROM event_publication WHERE event_id = '" + id + "'");
    }
    static std::string quoted(const std::string& value) { return "'" + value + "'"; }

    TestDatabase db_;
    TempDir dir_;
};

TEST_F(TraceContext, AValidTraceparentIsStoredFromTheArgumentsOrTheTransactionsSettings) {
    const std::string base = "outbox_publish('acme', 'OrderedStep', '{}'";
    EXPECT_EQ(stored(publish(base + ")")), "-|-") << "no trace context: nothing stored";
    EXPECT_EQ(stored(publish(base + ", traceparent => " + quoted(kParent) + ")")), std::string(kParent) + "|-");
    EXPECT_EQ(stored(publish(base + ", traceparent => " + quoted(kParent) + ", tracestate => " + quoted(kState) + ")")),
              std::string(kParent) + "|" + kState);

    const std::string settings = "SET LOCAL outbox.traceparent = " + quoted(kParent) +
                                 "; SET LOCAL outbox.tracestate = " + quoted(kState);
    EXPECT_EQ(stored(publish(base + ")", settings)), std::string(kParent) + "|" + kState)
        << "an existing call picks the context up from the transaction";
    EXPECT_EQ(stored(publish(base + ", 'order-1', 'dedup-1')", settings)), std::string(kParent) + "|" + kState);
    EXPECT_EQ(stored(publish(base + ", traceparent => " + quoted(kOtherParent) + ")", settings)),
              std::string(kOtherParent) + "|-")
        << "the arguments win, as a pair: the setting's tracestate belongs to another parent";
    EXPECT_EQ(stored(publish(base + ")")), "-|-") << "SET LOCAL ends with its transaction";

    // outbox_publish_many() publishes through outbox_publish(): every event takes the setting.
    pqxx::connection conn(db_.url());
    pqxx::work tx(conn);
    tx.exec("SELECT set_config('outbox.traceparent', " + quoted(kParent) + ", true)");
    const auto ids = tx.exec("SELECT id::text FROM outbox_publish_many('acme', "
                             "'[{\"event_type\": \"OrderedStep\", \"payload\": {}, \"aggregate_key\": \"a\"}, "
                             "{\"event_type\": \"OrderedStep\", \"payload\": {}}]') AS id");
    tx.commit();
    ASSERT_EQ(ids.size(), 2U);
    for (const auto& row : ids) EXPECT_EQ(stored(row[0].as<std::string>()), std::string(kParent) + "|-");
}

TEST_F(TraceContext, AMalformedTraceContextIsDroppedAndTheEventIsStillPublished) {
    const std::string trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    const std::string parent_id = "00f067aa0ba902b7";
    const std::vector<std::string> malformed{
        "",
        "garbage",
        "00-" + trace_id + "-" + parent_id,                         // no flags
        "00-" + trace_id + "-" + parent_id + "-01-extra",           // version 00 is exactly 55 characters
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-" + parent_id + "-01", // upper case
        "ff-" + trace_id + "-" + parent_id + "-01",                 // the forbidden version
        "00-00000000000000000000000000000000-" + parent_id + "-01", // all-zero trace id
        "00-" + trace_id + "-0000000000000000-01",                  // all-zero parent id
        "00-" + trace_id + "-" + parent_id + "-0g",
        " 00-" + trace_id + "-" + parent_id + "-01",
    };
    for (const auto& value : malformed) {
        for (const bool as_setting : {false, true}) {
            std::string id;
            ASSERT_NO_THROW(id = as_setting ? publish("outbox_publish('acme', 'OrderedStep', '{}')",
                                                      "SELECT set_config('outbox.traceparent', " + quoted(value) +
                                                          ", true); SET LOCAL outbox.tracestate = " + quoted(kState))
                                            : publish("outbox_publish('acme', 'OrderedStep', '{}', traceparent => " +
                                                      quoted(value) + ", tracestate => " + quoted(kState) + ")"))
                << "[" << value << "] refused";
            EXPECT_EQ(stored(id), "-|-") << "[" << value << "] kept" << (as_setting ? " from the setting" : "");
        }
    }
    // A later version with more fields is read as version 00 says, and passed on as 00.
    EXPECT_EQ(stored(publish("outbox_publish('acme', 'OrderedStep', '{}', traceparent => '01-" + trace_id + "-" +
                             parent_id + "-01-future')")),
              "00-" + trace_id + "-" + parent_id + "-01|-");

    const std::string with_parent = "outbox_publish('acme', 'OrderedStep', '{}', traceparent => " + quoted(kParent);
    EXPECT_EQ(stored(publish(with_parent + ", tracestate => repeat('a', 513))")), std::string(kParent) + "|-")
        << "a tracestate longer than 512 characters is dropped, the traceparent kept";
    EXPECT_EQ(stored(publish(with_parent + ", tracestate => 'k=v' || chr(10) || 'x')")), std::string(kParent) + "|-");
    EXPECT_EQ(stored(publish(with_parent + ", tracestate => 'k=caf' || chr(233))")), std::string(kParent) + "|-");
    EXPECT_EQ(stored(publish("outbox_publish('acme', 'OrderedStep', '{}', tracestate => " + quoted(kState) + ")")), "-|-")
        << "a tracestate without a traceparent is dropped";
    EXPECT_EQ(db_.scalar("SELECT count(*) FROM event_publication"), std::to_string(malformed.size() * 2 + 5));
}

TEST_F(TraceContext, TheHandlerReadsThePublishedTraceContext) {
    const auto record = dir_.path() / "starts.txt";
    const auto traces = dir_.path() / "traces.txt";
    const plugin::HandlerConfigs configs{
        {"ordered-recorder", nlohmann::json{{"file", record.string()}, {"trace_file", traces.string()}}.dump()}};
    TestHost host(fast_options(db_.url(), "h1"), std::vector<std::string>{OUTBOX_FIXTURE_ORDERED_RECORDER}, configs);
    host.start();

    std::map<std::string, std::string> expected;
    expected[publish("outbox_publish('acme', 'OrderedStep', '{}', traceparent => " + quoted(kParent) +
                     ", tracestate => " + quoted(kState) + ")")] = std::string(kParent) + "|" + kState;
    expected[publish("outbox_publish('acme', 'OrderedStep', '{}', 'order-1')",
                     "SET LOCAL outbox.traceparent = " + quoted(kOtherParent))] = std::string(kOtherParent) + "|";
    expected[publish("outbox_publish('acme', 'OrderedStep', '{}')")] = "|";
    ASSERT_TRUE(wait_until(
        [&] { return db_.scalar("SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'") == "3"; }, 20s));

    std::map<std::string, std::string> seen;
    std::ifstream in(traces);
    std::string line;
    while (std::getline(in, line)) {
        const auto space = line.find(' ');
        seen[line.substr(0, space)] = line.substr(space + 1);
    }
    EXPECT_EQ(seen, expected);
}

TEST_F(TraceContext, TheCppPublisherPassesItAndPublishManyRefusesOneItCouldNotCarry) {
    static const sdk::PayloadSchema kSchema{{"step", sdk::FieldKind::Integer}};
    sdk::SafePayload payload{kSchema};
    payload.set("step", 1);
    pqxx::connection conn(db_.url());
    std::string traced;
    std::string delayed;
    std::string state_only;
    {
        pqxx::work tx(conn);
        traced = sdk::publish(tx, "acme", "OrderedStep", payload, {.traceparent = kParent, .tracestate = kState});
        delayed = sdk::publish(tx, "acme", "OrderedStep", payload,
                               {.deliver_after = std::chrono::system_clock::now() + 1h, .traceparent = kParent});
        tx.exec("SET LOCAL outbox.traceparent = " + quoted(kOtherParent));
        state_only = sdk::publish(tx, "acme", "OrderedStep", payload, {.tracestate = kState});
        tx.commit();
    }
    EXPECT_EQ(stored(traced), std::string(kParent) + "|" + kState);
    EXPECT_EQ(stored(delayed), std::string(kParent) + "|-");
    EXPECT_EQ(db_.scalar("SELECT deliver_after > now() + interval '50 minutes' FROM event_publication "
                         "WHERE event_id = '" + delayed + "'"),
              "t");
    EXPECT_EQ(stored(state_only), "-|-") << "a tracestate alone is no context, and the setting is not mixed in";

    pqxx::work tx(conn);
    try {
        sdk::publish_many(tx, "acme", {sdk::PublishItem{"OrderedStep", payload, {.traceparent = kParent}}});
        ADD_FAILURE() << "publish_many() dropped a per-event trace context silently";
    } catch (const std::invalid_argument& error) {
        EXPECT_THAT(error.what(), HasSubstr("outbox.traceparent"));
    }
}

}  // namespace
}  // namespace outbox::test
