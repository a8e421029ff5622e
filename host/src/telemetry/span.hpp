#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "outbox/sdk/context.hpp"

namespace outbox::telemetry {

using TraceId = std::array<std::uint8_t, 16>;
using SpanId = std::array<std::uint8_t, 8>;

/// A W3C traceparent, parsed: version 00 (or a later version read by 00's layout), a
/// non-zero trace id and parent id.
struct TraceParent {
    TraceId trace_id{};
    SpanId parent_id{};
    bool sampled = false;
};

/// Parses a traceparent header value; nullopt when it is not a valid one (the rules of
/// outbox_trace_parent() in V23, which stores only valid ones).
std::optional<TraceParent> parse_traceparent(std::string_view value);
/// "00-<trace id>-<span id>-<01 when sampled, else 00>".
std::string format_traceparent(const TraceId& trace_id, const SpanId& span_id, bool sampled);
/// Random, never all zero.
TraceId random_trace_id();
SpanId random_span_id();
std::string to_hex(const std::uint8_t* bytes, std::size_t size);

/// OTLP's Span.SpanKind.
enum class SpanKind : std::uint8_t { Internal = 1, Server = 2, Client = 3, Producer = 4, Consumer = 5 };

using AttributeValue = std::variant<std::string, std::int64_t, bool>;

/// One finished span, as exported.
struct Span {
    TraceId trace_id{};
    SpanId span_id{};
    std::optional<SpanId> parent_span_id;
    std::string trace_state;
    std::string name;
    SpanKind kind = SpanKind::Internal;
    std::uint64_t start_unix_nano = 0;
    std::uint64_t end_unix_nano = 0;
    std::vector<std::pair<std::string, AttributeValue>> attributes;
    bool error = false;           // Status.code ERROR, else UNSET
    std::string status_message;   // with error: a safe code, never payload text
};

/// Now, in nanoseconds since the Unix epoch.
std::uint64_t now_unix_nano();

/// The trace of one handler call: what ctx.trace() returns, and its span while one is
/// recorded. Exporting, a call is a CONSUMER span whose parent is the published context
/// (a new trace when there is none) and ctx.trace() names that span, so the handler's
/// remote calls become its children; a published context whose sampled flag is off is
/// passed on unchanged and not recorded (parent-based sampling). Not exporting, ctx.trace()
/// is the published context as it is.
struct CallTrace {
    sdk::TraceContext context;
    std::optional<Span> span;
};
CallTrace start_call(const sdk::TraceContext& published, bool exporting);
/// Ends `span` now with what the call came to: attributes outbox.event_type,
/// outbox.handler, outbox.attempt, outbox.outcome and (when failed) outbox.error_code,
/// and an ERROR status carrying the code. Never an event id, company or payload value.
void finish_call(Span& span, const std::string& event_type, const std::string& handler, int attempt,
                 std::string_view outcome, const std::string& error_code);
/// One claim statement's span (a trace of its own): outbox.claimed and outbox.lane.
Span claim_span(std::uint64_t start_unix_nano, std::size_t claimed, bool suspect);

}  // namespace outbox::telemetry
