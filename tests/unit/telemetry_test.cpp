// The pure parts of span export: reading a traceparent as W3C Trace Context says, the trace
// context a handler call gets with and without export, and the attributes its span carries.
// (The OTLP encoding itself is decoded by the official OpenTelemetry definitions in the
// e2e tier's receiver.)
#include <gtest/gtest.h>

#include <set>

#include "telemetry/otlp.hpp"
#include "telemetry/span.hpp"

namespace outbox::test {
namespace {

using telemetry::parse_traceparent;

constexpr const char* kTraceId = "4bf92f3577b34da6a3ce929d0e0e4736";
constexpr const char* kParentId = "00f067aa0ba902b7";

std::string parent(const std::string& flags = "01", const std::string& version = "00") {
    return version + "-" + kTraceId + "-" + kParentId + "-" + flags;
}

TEST(Telemetry, ATraceparentIsReadAsW3CTraceContextSays) {
    const auto parsed = parse_traceparent(parent());
    ASSERT_TRUE(parsed.has_value());
    EXPECT_EQ(telemetry::to_hex(parsed->trace_id.data(), parsed->trace_id.size()), kTraceId);
    EXPECT_EQ(telemetry::to_hex(parsed->parent_id.data(), parsed->parent_id.size()), kParentId);
    EXPECT_TRUE(parsed->sampled);
    EXPECT_FALSE(parse_traceparent(parent("00"))->sampled);
    EXPECT_TRUE(parse_traceparent(parent("03"))->sampled) << "other flag bits do not matter";
    EXPECT_TRUE(parse_traceparent(parent("01", "01") + "-more").has_value()) << "a later version with more fields";
    EXPECT_TRUE(parse_traceparent(parent("01", "01")).has_value());

    for (const std::string& bad : {std::string(), std::string("garbage"), parent() + "-x", parent("01", "01") + "x",
                                   parent("01", "ff"), parent("0G"), parent().substr(0, 54),
                                   std::string("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"),
                                   std::string("00-00000000000000000000000000000000-00f067aa0ba902b7-01"),
                                   std::string("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"),
                                   std::string("00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")}) {
        EXPECT_FALSE(parse_traceparent(bad).has_value()) << bad;
    }
}

TEST(Telemetry, WithoutExportACallGetsThePublishedContextAsItIs) {
    const sdk::TraceContext published{parent(), "rojo=1"};
    const auto call = telemetry::start_call(published, false);
    EXPECT_EQ(call.context.traceparent, published.traceparent);
    EXPECT_EQ(call.context.tracestate, published.tracestate);
    EXPECT_FALSE(call.span.has_value());
    EXPECT_EQ(telemetry::start_call({}, false).context.traceparent, "");
}

TEST(Telemetry, ExportingACallIsAChildOfThePublishedContextAndItsHandlerSeesTheCallsSpan) {
    const auto call = telemetry::start_call({parent(), "rojo=1"}, true);
    ASSERT_TRUE(call.span.has_value());
    const telemetry::Span& span = *call.span;
    EXPECT_EQ(telemetry::to_hex(span.trace_id.data(), 16), kTraceId) << "the publisher's trace";
    ASSERT_TRUE(span.parent_span_id.has_value());
    EXPECT_EQ(telemetry::to_hex(span.parent_span_id->data(), 8), kParentId);
    EXPECT_EQ(span.trace_state, "rojo=1");
    EXPECT_EQ(span.kind, telemetry::SpanKind::Consumer);
    EXPECT_EQ(call.context.traceparent,
              std::string("00-") + kTraceId + "-" + telemetry::to_hex(span.span_id.data(), 8) + "-01")
        << "the handler's remote calls become children of the call's span";
    EXPECT_EQ(call.context.tracestate, "rojo=1");

    const auto root = telemetry::start_call({}, true);
    ASSERT_TRUE(root.span.has_value());
    EXPECT_FALSE(root.span->parent_span_id.has_value()) << "no published context: a trace of its own";
    EXPECT_TRUE(parse_traceparent(root.context.traceparent).has_value());

    const auto unsampled = telemetry::start_call({parent("00"), "rojo=1"}, true);
    EXPECT_FALSE(unsampled.span.has_value()) << "the publisher did not sample this trace";
    EXPECT_EQ(unsampled.context.traceparent, parent("00")) << "passed on unchanged";

    std::set<std::string> ids;
    for (int i = 0; i < 1000; ++i) {
        const auto one = telemetry::start_call({}, true);
        ids.insert(telemetry::to_hex(one.span->span_id.data(), 8));
    }
    EXPECT_EQ(ids.size(), 1000U);
}

TEST(Telemetry, AFinishedCallCarriesItsOutcomeAndNothingThatIdentifiesTheEvent) {
    auto call = telemetry::start_call({}, true);
    telemetry::finish_call(*call.span, "OrderPlaced", "mailer", 3, "retry", "HTTP_503");
    const telemetry::Span& span = *call.span;
    EXPECT_EQ(span.name, "process OrderPlaced");
    EXPECT_GE(span.end_unix_nano, span.start_unix_nano);
    EXPECT_TRUE(span.error);
    EXPECT_EQ(span.status_message, "HTTP_503");
    std::set<std::string> keys;
    for (const auto& [key, value] : span.attributes) keys.insert(key);
    EXPECT_EQ(keys, (std::set<std::string>{"messaging.system", "messaging.operation.type", "outbox.event_type",
                                           "outbox.handler", "outbox.attempt", "outbox.outcome", "outbox.error_code"}));

    auto ok = telemetry::start_call({}, true);
    telemetry::finish_call(*ok.span, "OrderPlaced", "mailer", 1, "success", "");
    EXPECT_FALSE(ok.span->error);
    EXPECT_EQ(ok.span->attributes.size(), 6U) << "no error code when there is none";
}

TEST(Telemetry, TheExportBodyHoldsEverySpan) {
    std::vector<telemetry::Span> spans;
    for (int i = 0; i < 3; ++i) spans.push_back(telemetry::claim_span(telemetry::now_unix_nano(), 5, false));
    const std::string one = telemetry::encode_export_request({spans[0]}, "outboxd", "0.3.0", "h1");
    const std::string three = telemetry::encode_export_request(spans, "outboxd", "0.3.0", "h1");
    EXPECT_GT(three.size(), one.size());
    EXPECT_EQ(static_cast<unsigned char>(three[0]), 0x0aU) << "field 1 (resource_spans), length-delimited";
    EXPECT_NE(three.find("service.name"), std::string::npos);
}

}  // namespace
}  // namespace outbox::test
