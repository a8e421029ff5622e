// Spans over OTLP/HTTP from a real `outboxd run` to a receiver on loopback that decodes them
// with the official OpenTelemetry protobuf definitions (tests/telemetry/otlp_receiver.cjs,
// installed by scripts/otlp-decoder.sh): each handler call is a child of the trace context
// its event was published with, the handler's ctx.trace() names that call's span, claims
// have spans of their own, no payload value leaves the host, and with the receiver gone
// events still complete while the dropped spans are counted.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <httplib.h>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "support/child_process.hpp"
#include "support/pg_fixture.hpp"
#include "support/ports.hpp"
#include "support/temp_dir.hpp"
#include "support/test_host.hpp"

namespace outbox::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kTelemetrySecret = "do-not-export-4711";

fs::path decoder_dir() {
    if (const char* dir = std::getenv("OUTBOX_OTLP_DECODER_DIR")) return dir;
    return fs::path(OUTBOX_FIXTURE_DIR).parent_path().parent_path() / "otlp-decoder";
}

// `node` on PATH (the child is started with execve, which does not search it).
std::string node_binary() {
    std::string path = std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin";
    for (std::size_t start = 0; start <= path.size();) {
        const auto end = std::min(path.find(':', start), path.size());
        const fs::path candidate = fs::path(path.substr(start, end - start)) / "node";
        if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
        start = end + 1;
    }
    return "node";
}

// W3C ids for the i-th traced event: trace 4bf9...<i>, parent 00f0...<i>.
std::string trace_id(int i, int series = 0) {
    char id[33];
    std::snprintf(id, sizeof id, "4bf92f3577b34da6a3ce%04x%08x", series, i + 1);
    return id;
}
std::string parent_id(int i) {
    char id[17];
    std::snprintf(id, sizeof id, "00f067aa%08x", i + 1);
    return id;
}

class TelemetryE2e : public ::testing::Test {
protected:
    void SetUp() override {
        if (const char* why = std::getenv("OUTBOX_OTLP_DECODER_UNAVAILABLE")) GTEST_SKIP() << why;
        ASSERT_TRUE(fs::exists(decoder_dir() / "node_modules"))
            << "the OTLP decoder is not installed: run scripts/otlp-decoder.sh " << decoder_dir().string();
        fs::create_directories(plugins_);
        fs::create_directories(received_);
        fs::copy_file(OUTBOX_FIXTURE_ORDERED_RECORDER, plugins_ / "libordered_recorder.so");
        receiver_ = std::make_unique<ChildProcess>(
            std::vector<std::string>{node_binary(), std::string(OUTBOX_SOURCE_DIR) + "/tests/telemetry/otlp_receiver.cjs",
                                     (decoder_dir() / "node_modules").string(), received_.string()},
            std::map<std::string, std::string>{}, (dir_.path() / "receiver.log").string());
        ASSERT_TRUE(wait_until([&] { return fs::exists(received_ / "port"); }, 20s))
            << read_file((dir_.path() / "receiver.log").string());
        const std::string config = (dir_.path() / "outboxd.yaml").string();
        std::ofstream(config) << "handlers:\n  ordered-recorder:\n    config:\n      file: " << (dir_.path() / "starts.txt").string()
                              << "\n      trace_file: " << traces_.string() << "\n";
        auto env = outboxd_env(db_.url(), plugins_);
        env["OUTBOX_TELEMETRY_OTLP_ENDPOINT"] =
            "http://127.0.0.1:" + read_file((received_ / "port").string()) + "/v1/traces";
        env["OUTBOX_TELEMETRY_SERVICE_NAME"] = "outboxd-e2e";
        env["OUTBOX_HOST_ID"] = "traced-host";
        env["OUTBOX_ADMIN_LISTEN"] = "127.0.0.1:" + std::to_string(admin_port_);
        host_ = std::make_unique<ChildProcess>(std::vector<std::string>{OUTBOXD_BINARY, "run", "--config", config}, env,
                                               (dir_.path() / "host.log").string());
    }
    void TearDown() override {
        if (host_) {
            host_->signal(SIGTERM);
            EXPECT_EQ(host_->wait(20s), std::optional<int>(0)) << read_file((dir_.path() / "host.log").string());
        }
    }

    /// Publishes one OrderedStep; `trace` is the named arguments to add, e.g.
    /// ", traceparent => '...'".
    std::string publish(const std::string& payload, const std::string& trace = "") const {
        return db_.scalar("SELECT outbox_publish('acme-e2e', 'OrderedStep', '" + payload + "'::jsonb" + trace +
                          ")::text");
    }
    long long count(const std::string& sql) const { return std::stoll(db_.scalar(sql)); }

    std::vector<json> spans() const {
        std::vector<json> all;
        std::ifstream in(received_ / "spans.jsonl");
        std::string line;
        while (std::getline(in, line)) all.push_back(json::parse(line));
        return all;
    }
    std::vector<json> spans_named(const std::string& name) const {
        std::vector<json> named;
        for (auto& span : spans()) {
            if (span["name"] == name) named.push_back(std::move(span));
        }
        return named;
    }
    /// event id -> the traceparent its handler saw in ctx.trace()
    std::map<std::string, std::string> handler_traces() const {
        std::map<std::string, std::string> seen;
        std::ifstream in(traces_);
        std::string line;
        while (std::getline(in, line)) {
            const auto space = line.find(' ');
            seen[line.substr(0, space)] = line.substr(space + 1, line.find('|') - space - 1);
        }
        return seen;
    }
    long long dropped() const {
        httplib::Client client("127.0.0.1", admin_port_);
        client.set_connection_timeout(1s);
        const auto metrics = client.Get("/metrics");
        if (!metrics || metrics->status != 200) return -1;
        const std::string name = "outbox_telemetry_spans_dropped_total ";
        const auto at = metrics->body.find("\n" + name);
        return at == std::string::npos ? -1 : std::stoll(metrics->body.substr(at + 1 + name.size()));
    }

    TestDatabase db_;
    TempDir dir_;
    fs::path plugins_ = dir_.path() / "plugins";
    fs::path received_ = dir_.path() / "received";
    fs::path traces_ = dir_.path() / "traces.txt";
    int admin_port_ = free_port();
    std::unique_ptr<ChildProcess> receiver_;
    std::unique_ptr<ChildProcess> host_;
};

TEST_F(TelemetryE2e, EachCallIsAChildOfItsPublishedTraceAndCarriesNoPayload) {
    constexpr int kTraced = 20;
    std::map<std::string, int> traced;  // event id -> i
    for (int i = 0; i < kTraced; ++i) {
        const std::string payload = i == 0 ? R"({"review": true, "note": ")" + std::string(kTelemetrySecret) + "\"}"
                                           : R"({"note": ")" + std::string(kTelemetrySecret) + "\"}";
        traced[publish(payload, ", traceparent => '00-" + trace_id(i) + "-" + parent_id(i) +
                                    "-01', tracestate => 'rojo=" + std::to_string(i) + "'")] = i;
    }
    std::map<std::string, std::string> unsampled;  // event id -> its traceparent
    for (int i = 0; i < 2; ++i) {
        const std::string parent = "00-" + trace_id(i, 1) + "-" + parent_id(i) + "-00";
        unsampled[publish("{}", ", traceparent => '" + parent + "'")] = parent;
    }
    std::set<std::string> untraced;
    for (int i = 0; i < 3; ++i) untraced.insert(publish("{}"));
    ASSERT_TRUE(wait_until([&] { return count("SELECT count(*) FROM event_publication WHERE status IN "
                                              "('COMPLETED', 'REVIEW_REQUIRED')") == kTraced + 5; },
                           30s))
        << read_file((dir_.path() / "host.log").string());
    ASSERT_TRUE(wait_until([&] { return spans_named("process OrderedStep").size() >= kTraced + 3U; }, 20s))
        << "spans received: " << spans().size() << "\n" << read_file((dir_.path() / "host.log").string());

    const auto calls = spans_named("process OrderedStep");
    EXPECT_EQ(calls.size(), kTraced + 3U) << "one span per call; none for the two unsampled traces";
    std::map<std::string, json> by_trace;
    for (const auto& span : calls) by_trace[span["traceId"]] = span;
    const auto seen = handler_traces();
    for (const auto& [event_id, i] : traced) {
        ASSERT_TRUE(by_trace.contains(trace_id(i))) << "no span in the published trace " << trace_id(i);
        const json& span = by_trace[trace_id(i)];
        EXPECT_EQ(span["parentSpanId"], parent_id(i)) << "a child of the publisher's span";
        EXPECT_EQ(span["traceState"], "rojo=" + std::to_string(i));
        EXPECT_EQ(span["kind"], 5) << "SPAN_KIND_CONSUMER";
        EXPECT_EQ(span["attributes"]["outbox.event_type"], "OrderedStep");
        EXPECT_EQ(span["attributes"]["outbox.handler"], "ordered-recorder");
        EXPECT_EQ(span["attributes"]["outbox.attempt"], 1);
        EXPECT_EQ(span["attributes"]["outbox.outcome"], i == 0 ? "review_required" : "success");
        EXPECT_EQ(span["statusCode"], i == 0 ? 2 : 0) << "STATUS_CODE_ERROR for the failed call only";
        if (i == 0) {
            EXPECT_EQ(span["attributes"]["outbox.error_code"], "ORDER_REVIEW");
        }
        EXPECT_LE(std::stoull(span["start"].get<std::string>()), std::stoull(span["end"].get<std::string>()));
        EXPECT_EQ(seen.at(event_id), "00-" + trace_id(i) + "-" + span["spanId"].get<std::string>() + "-01")
            << "the handler's own remote calls become children of the call's span";
    }
    for (const auto& [id, parent] : unsampled) {
        EXPECT_EQ(seen.at(id), parent) << "an unsampled context is passed on unchanged";
        EXPECT_FALSE(by_trace.contains(parent.substr(3, 32)));
    }
    int roots = 0;
    for (const auto& span : calls) {
        if (span["parentSpanId"] == "") ++roots;
    }
    EXPECT_EQ(roots, 3) << "events published without a context start a trace of their own";
    for (const auto& id : untraced) EXPECT_TRUE(by_trace.contains(seen.at(id).substr(3, 32)));

    const auto claims = spans_named("claim");
    ASSERT_FALSE(claims.empty());
    long long claimed = 0;
    for (const auto& span : claims) claimed += span["attributes"]["outbox.claimed"].get<long long>();
    EXPECT_EQ(claimed, kTraced + 5) << "every claimed event is in one claim span";
    const json& resource = calls.front()["resource"];
    EXPECT_EQ(resource["service.name"], "outboxd-e2e");
    EXPECT_EQ(resource["service.instance.id"], "traced-host");
    EXPECT_EQ(calls.front()["scope"], "outboxd");

    const std::string raw = read_file((received_ / "raw.bin").string());
    EXPECT_EQ(raw.find(kTelemetrySecret), std::string::npos) << "a payload value left the host";
    EXPECT_EQ(raw.find("acme-e2e"), std::string::npos) << "the company left the host";
    for (const auto& [event_id, i] : traced) EXPECT_EQ(raw.find(event_id), std::string::npos) << "an event id left the host";
    EXPECT_FALSE(fs::exists(received_ / "errors.txt")) << read_file((received_ / "errors.txt").string());
    EXPECT_EQ(dropped(), 0);
}

TEST_F(TelemetryE2e, WithTheReceiverGoneEventsStillCompleteAndTheDroppedSpansAreCounted) {
    publish("{}");
    ASSERT_TRUE(wait_until([&] { return !spans_named("process OrderedStep").empty(); }, 20s))
        << read_file((dir_.path() / "host.log").string());
    receiver_->signal(SIGKILL);
    receiver_->wait(5s);
    for (int i = 0; i < 30; ++i) publish("{}", ", traceparent => '00-" + trace_id(i) + "-" + parent_id(i) + "-01'");
    ASSERT_TRUE(wait_until([&] { return count("SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'") == 31; },
                           30s))
        << read_file((dir_.path() / "host.log").string());
    // Batches leave every second; the refused connection drops each at once.
    EXPECT_TRUE(wait_until([&] { return dropped() >= 30; }, 10s)) << "dropped: " << dropped();
    EXPECT_NE(read_file((dir_.path() / "host.log").string()).find("OTLP_EXPORT_FAILED"), std::string::npos);
}

}  // namespace
}  // namespace outbox::test
