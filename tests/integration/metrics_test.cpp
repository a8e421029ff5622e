// GET /metrics after a known workload: every value checked against the database and the
// work the host really did.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>
#include <string_view>

#include <pqxx/pqxx>

#include "admin_support.hpp"
#include "metrics/prometheus.hpp"
#include "operations/backlog_query.hpp"
#include "support/test_host.hpp"

namespace outbox::test {
namespace {

using namespace std::chrono_literals;

/// "name{labels}" -> value, for every sample line; checks HELP/TYPE precede each family.
std::map<std::string, double> parse_exposition(const std::string& text) {
    std::map<std::string, double> samples;
    std::set<std::string> typed;
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
        if (line.rfind("# TYPE ", 0) == 0) {
            typed.insert(line.substr(7, line.find(' ', 7) - 7));
            continue;
        }
        if (line.empty() || line[0] == '#') continue;
        const auto space = line.rfind(' ');
        const std::string key = line.substr(0, space);
        std::string family = key.substr(0, key.find('{'));
        for (const std::string_view suffix : {"_bucket", "_sum", "_count"}) {
            if (family.ends_with(suffix) && !typed.contains(family)) family.erase(family.size() - suffix.size());
        }
        EXPECT_TRUE(typed.contains(family)) << "sample before its # TYPE: " << line;
        samples[key] = std::stod(line.substr(space + 1));
    }
    return samples;
}

class MetricsEndpoint : public ::testing::Test {
protected:
    void SetUp() override { create_scripted_effect_table(db_.url()); }
    long long count(const std::string& sql) const { return std::stoll(db_.scalar(sql)); }
    long long in_status(const std::string& status) const {
        return count("SELECT count(*) FROM event_publication WHERE status = '" + status + "'");
    }
    TestDatabase db_;
};

TEST_F(MetricsEndpoint, ValuesMatchTheDatabaseAndTheWorkDone) {
    publish_many(db_.url(), "TestRequested", "{}", 20);
    publish_many(db_.url(), "TestRequested", R"({"mode": "review"})", 3);
    publish_many(db_.url(), "TestRequested", R"({"mode": "retry", "retry_after_ms": 600000})", 2);
    publish_many(db_.url(), "Unwanted", "{}", 4);  // no handler anywhere
    TestHost host(fast_options(db_.url(), "metrics-host"), {OUTBOX_FIXTURE_SCRIPTED});
    host.start();
    ASSERT_TRUE(wait_until([&] {
        return in_status("COMPLETED") == 20 && in_status("REVIEW_REQUIRED") == 3 && in_status("RETRY_WAIT") == 2;
    }, 30s));
    host.stop();

    // Shape the delays: unhandled events 500s old, a due event scripted already consumed
    // (not its delay), a due one it has not (50s) and one in flight (70s).
    db_.exec("UPDATE event_publication SET occurred_at = now() - interval '500 seconds' WHERE event_type = 'Unwanted'");
    const std::string consumed = publish_many(db_.url(), "TestRequested", "{}", 1)[0];
    db_.exec("UPDATE event_publication SET occurred_at = now() - interval '900 seconds' WHERE event_id = '" + consumed + "'");
    db_.exec("INSERT INTO event_consumption (event_id, handler_name) VALUES ('" + consumed + "', 'scripted')");
    const std::string due = publish_many(db_.url(), "TestRequested", "{}", 1)[0];
    db_.exec("UPDATE event_publication SET occurred_at = now() - interval '50 seconds' WHERE event_id = '" + due + "'");
    const std::string running = publish_many(db_.url(), "TestBatch", "{}", 1)[0];
    db_.exec("UPDATE event_publication SET status = 'PROCESSING', lease_owner = 'elsewhere', lease_token = "
             "gen_random_uuid(), lease_expires_at = now() + interval '5 minutes', occurred_at = now() - interval "
             "'70 seconds' WHERE event_id = '" + running + "'");

    host.metrics().plugin_load_failures(1);
    admin::AdminOptions options;
    options.listen = {"127.0.0.1", 0};
    options.database_url = db_.url();
    options.host_id = "metrics-host";
    const std::shared_ptr<const routing::HandlerSet> handlers(std::shared_ptr<void>{}, &host.handlers());
    admin::AdminServer server(options, host.metrics(), handlers);
    server.start();
    httplib::Client client("127.0.0.1", server.port());
    const auto res = client.Get("/metrics");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200);
    EXPECT_EQ(res->get_header_value("Content-Type"), metrics::kPrometheusContentType);
    const auto m = parse_exposition(res->body);
    auto at = [&](const std::string& key) {
        const auto found = m.find(key);
        EXPECT_NE(found, m.end()) << key << " missing in\n" << res->body;
        return found == m.end() ? -1.0 : found->second;
    };

    EXPECT_EQ(at(R"(outbox_host_info{host_id="metrics-host",version=")" OUTBOXD_VERSION R"("})"), 1);
    EXPECT_EQ(at("outbox_database_up"), 1);
    for (const char* status : {"PENDING", "RETRY_WAIT", "PROCESSING", "REVIEW_REQUIRED"}) {
        EXPECT_EQ(at(std::string(R"(outbox_publications_backlog{status=")") + status + "\"}"), in_status(status))
            << status;
    }
    EXPECT_EQ(in_status("PENDING"), 6);
    EXPECT_EQ(m.count(R"(outbox_publications_backlog{status="COMPLETED"})"), 0u) << "completed work is not backlog";

    // Ages were set relative to now(); the 60 s above each is how long the test may take
    // to read them back, and still short of any other event's age.
    const double overall = at("outbox_publications_oldest_delay_seconds");
    EXPECT_GE(overall, 900);
    EXPECT_LT(overall, 960);
    const double scripted = at(R"(outbox_publications_oldest_delay_seconds{handler="scripted"})");
    EXPECT_GE(scripted, 70) << "the in-flight TestBatch event, not the one scripted already consumed";
    EXPECT_LT(scripted, 130);

    EXPECT_EQ(at(R"(outbox_publications_processed_total{result="completed"})"), 20);
    EXPECT_EQ(at(R"(outbox_publications_processed_total{result="retry"})"), 2);
    EXPECT_EQ(at(R"(outbox_publications_processed_total{result="review_required"})"), 3);
    EXPECT_EQ(at(R"(outbox_handler_calls_total{handler="scripted",result="success"})"), 20);
    EXPECT_EQ(at(R"(outbox_handler_calls_total{handler="scripted",result="retry"})"), 2);
    EXPECT_EQ(at(R"(outbox_handler_calls_total{handler="scripted",result="review_required"})"), 3);
    EXPECT_EQ(at(R"(outbox_handler_duration_seconds_count{handler="scripted"})"), 25);
    EXPECT_EQ(at(R"(outbox_handler_duration_seconds_bucket{handler="scripted",le="+Inf"})"), 25);
    double previous = 0;
    for (const double bound : metrics::kDurationBuckets) {
        std::ostringstream key;
        key << R"(outbox_handler_duration_seconds_bucket{handler="scripted",le=")" << bound << "\"}";
        const double value = at(key.str());
        EXPECT_GE(value, previous) << "buckets are cumulative";
        previous = value;
    }
    EXPECT_GT(at(R"(outbox_handler_duration_seconds_sum{handler="scripted"})"), 0);
    EXPECT_EQ(at("outbox_events_claimed_total"), 25);
    EXPECT_EQ(at("outbox_leases_lost_total"), 0);
    EXPECT_EQ(at("outbox_outcomes_refused_total"), 0);
    EXPECT_EQ(at("outbox_events_rescued_total"), 0);
    EXPECT_EQ(at("outbox_plugin_load_failures_total"), 1);
    server.stop();
}

// The operations guide's meanings: a retry waiting for its backoff is still late (it counts
// in the oldest delay, fleet-wide and per handler); a REVIEW_REQUIRED event waits for a
// person and has its own gauge; events held back by an earlier one of their aggregate are
// counted as blocked.
TEST_F(MetricsEndpoint, OldestDelayCountsRetriesNotYetDueAndReviewAndBlockedHaveTheirOwnGauges) {
    TestHost host(fast_options(db_.url(), "metrics-host"), {OUTBOX_FIXTURE_SCRIPTED});
    host.start();
    host.stop();

    const std::string waiting = publish_many(db_.url(), "TestRequested", "{}", 1)[0];
    db_.exec("UPDATE event_publication SET status = 'RETRY_WAIT', attempt_count = 1, next_attempt_at = now() + "
             "interval '1 hour', occurred_at = now() - interval '2000 seconds' WHERE event_id = '" + waiting + "'");
    const std::string reviewed = review_event(db_);
    db_.exec("UPDATE event_publication SET occurred_at = now() - interval '3000 seconds' WHERE event_id = '" + reviewed +
             "'");
    // Aggregate a: a head and two events behind it; aggregate b: a head alone.
    pqxx::connection conn(db_.url());
    {
        pqxx::work tx(conn);
        for (const char* key : {"a", "a", "a", "b"}) {
            tx.exec_params("SELECT outbox_publish('acme', 'TestRequested', '{}', $1)", std::string(key));
        }
        tx.commit();
    }

    admin::AdminOptions options;
    options.listen = {"127.0.0.1", 0};
    options.database_url = db_.url();
    options.host_id = "metrics-host";
    const std::shared_ptr<const routing::HandlerSet> handlers(std::shared_ptr<void>{}, &host.handlers());
    admin::AdminServer server(options, host.metrics(), handlers);
    server.start();
    httplib::Client client("127.0.0.1", server.port());
    const auto res = client.Get("/metrics");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200);
    const auto m = parse_exposition(res->body);
    auto at = [&](const std::string& key) {
        const auto found = m.find(key);
        EXPECT_NE(found, m.end()) << key << " missing in\n" << res->body;
        return found == m.end() ? -1.0 : found->second;
    };
    // As above: 60 s for the test to read back ages set relative to now().
    const double overall = at("outbox_publications_oldest_delay_seconds");
    EXPECT_GE(overall, 2000) << "a RETRY_WAIT event not due yet is unfinished";
    EXPECT_LT(overall, 2060) << "a REVIEW_REQUIRED event is not in the delay";
    EXPECT_GE(at(R"(outbox_publications_oldest_delay_seconds{handler="scripted"})"), 2000);
    const double review = at("outbox_publications_oldest_review_seconds");
    EXPECT_GE(review, 3000);
    EXPECT_LT(review, 3060);
    EXPECT_EQ(at("outbox_publications_blocked"), 2) << "the two events behind aggregate a's head";
    server.stop();
}

// A delayed event is late only from its deliver_after: before it, it adds nothing to the
// oldest delay (fleet-wide, per handler, `outboxd status`), though it counts as PENDING.
TEST_F(MetricsEndpoint, ADelayedEventIsLateOnlyFromItsDeliverAfter) {
    TestHost host(fast_options(db_.url(), "metrics-host"), {OUTBOX_FIXTURE_SCRIPTED});
    host.start();
    host.stop();
    const auto publish_delayed = [&](const std::string& published, const std::string& due) {
        const std::string id = db_.scalar("SELECT outbox_publish('acme', 'TestRequested', '{}', "
                                          "deliver_after => now() + interval '1 hour')::text");
        db_.exec("UPDATE event_publication SET occurred_at = now() - interval '" + published +
                 "', deliver_after = now() + interval '" + due + "', next_attempt_at = now() + interval '" + due +
                 "' WHERE event_id = '" + id + "'");
    };
    pqxx::connection conn(db_.url());

    publish_delayed("5000 seconds", "1 hour");
    auto gauges = operations::read_db_gauges(conn, host.handlers(), 5s);
    EXPECT_EQ(gauges.backlog["PENDING"], 1);
    EXPECT_EQ(gauges.oldest_delay_seconds, 0) << "published long ago but not due yet: not late";
    EXPECT_EQ(gauges.handler_oldest_delay_seconds["scripted"], 0);
    EXPECT_EQ(operations::read_status_report(conn, {}).oldest_seconds, 0);

    publish_delayed("5000 seconds", "-100 seconds");
    gauges = operations::read_db_gauges(conn, host.handlers(), 5s);
    // 60 s for the test to read back ages set relative to now().
    EXPECT_GE(gauges.oldest_delay_seconds, 100) << "due 100 s ago";
    EXPECT_LT(gauges.oldest_delay_seconds, 160) << "counted from deliver_after, not occurred_at";
    EXPECT_GE(gauges.handler_oldest_delay_seconds["scripted"], 100);
    EXPECT_LT(gauges.handler_oldest_delay_seconds["scripted"], 160);
    const auto oldest = operations::read_status_report(conn, {}).oldest_seconds;
    EXPECT_GE(oldest, 100);
    EXPECT_LT(oldest, 160);
}

TEST_F(MetricsEndpoint, TheRescuersOutcomesAreCountedAsWorkerLost) {
    const std::string lost = publish_many(db_.url(), "TestRequested", "{}", 1)[0];
    db_.exec("UPDATE event_publication SET status = 'PROCESSING', attempt_count = 1, lease_owner = 'dead-host', "
             "lease_token = gen_random_uuid(), lease_expires_at = now() - interval '1 minute' WHERE event_id = '" +
             lost + "'");
    TestHost host(fast_options(db_.url(), "metrics-host"), {OUTBOX_FIXTURE_SCRIPTED});
    host.start();
    ASSERT_TRUE(wait_until([&] { return in_status("COMPLETED") == 1; }, 30s));
    host.stop();
    EXPECT_EQ(host.metrics().outcome_count(metrics::Metrics::Outcome::WorkerLost), 1u);
    const std::string text = metrics::render_prometheus(host.metrics(), std::nullopt, {"h", "1.0.0"});
    EXPECT_NE(text.find(R"(outbox_publications_processed_total{result="worker_lost"} 1)"), std::string::npos) << text;
    EXPECT_NE(text.find(R"(outbox_publications_processed_total{result="completed"} 1)"), std::string::npos) << text;
    EXPECT_NE(text.find(R"(outbox_publications_processed_total{result="discarded"} 0)"), std::string::npos) << text;
}

TEST(PrometheusText, BucketsAreCumulativeAndLabelsEscaped) {
    metrics::Metrics m;
    m.handler_call("a\"b\\c\nd", "success", std::chrono::milliseconds{3});
    m.handler_call("a\"b\\c\nd", "retry", std::chrono::seconds{20});
    const std::string text = metrics::render_prometheus(m, std::nullopt, {"h", "1.0.0"});
    const std::string label = R"(handler="a\"b\\c\nd")";
    EXPECT_NE(text.find("outbox_handler_duration_seconds_bucket{" + label + R"(,le="0.0025"} 0)"), std::string::npos)
        << text;
    EXPECT_NE(text.find("outbox_handler_duration_seconds_bucket{" + label + R"(,le="0.005"} 1)"), std::string::npos);
    EXPECT_NE(text.find("outbox_handler_duration_seconds_bucket{" + label + R"(,le="10"} 1)"), std::string::npos);
    EXPECT_NE(text.find("outbox_handler_duration_seconds_bucket{" + label + R"(,le="+Inf"} 2)"), std::string::npos);
    EXPECT_NE(text.find("outbox_handler_duration_seconds_sum{" + label + "} 20.003"), std::string::npos) << text;
    EXPECT_NE(text.find("outbox_database_up 0\n"), std::string::npos);
    EXPECT_EQ(text.find("outbox_publications_backlog{"), std::string::npos);
    EXPECT_NE(text.find(R"(outbox_publications_processed_total{result="completed"} 0)"), std::string::npos)
        << "outcome counters exist from the start, so rate() works at once";
    parse_exposition(text);
}

}  // namespace
}  // namespace outbox::test
