#include "telemetry/span.hpp"

#include <algorithm>
#include <chrono>
#include <random>

namespace outbox::telemetry {
namespace {

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;  // upper case is not valid in a traceparent
}

// Reads 2 * N lower-case hex digits at `at` into `out`; false on anything else.
template <std::size_t N>
bool read_hex(std::string_view value, std::size_t at, std::array<std::uint8_t, N>& out) {
    for (std::size_t i = 0; i < N; ++i) {
        const int high = hex_digit(value[at + 2 * i]);
        const int low = hex_digit(value[at + 2 * i + 1]);
        if (high < 0 || low < 0) return false;
        out[i] = static_cast<std::uint8_t>(high * 16 + low);
    }
    return true;
}

template <std::size_t N>
bool all_zero(const std::array<std::uint8_t, N>& bytes) {
    return std::all_of(bytes.begin(), bytes.end(), [](std::uint8_t b) { return b == 0; });
}

std::mt19937_64& generator() {
    thread_local std::mt19937_64 engine{[] {
        std::random_device device;
        return (static_cast<std::uint64_t>(device()) << 32) ^ device();
    }()};
    return engine;
}

template <std::size_t N>
std::array<std::uint8_t, N> random_bytes() {
    std::array<std::uint8_t, N> bytes{};
    do {
        for (std::size_t i = 0; i < N; i += 8) {
            const std::uint64_t word = generator()();
            for (std::size_t j = 0; j < 8 && i + j < N; ++j) bytes[i + j] = static_cast<std::uint8_t>(word >> (8 * j));
        }
    } while (all_zero(bytes));
    return bytes;
}

}  // namespace

std::optional<TraceParent> parse_traceparent(std::string_view value) {
    // version "-" trace-id "-" parent-id "-" flags: 2 + 1 + 32 + 1 + 16 + 1 + 2 = 55
    if (value.size() < 55 || value[2] != '-' || value[35] != '-' || value[52] != '-') return std::nullopt;
    std::array<std::uint8_t, 1> version{};
    std::array<std::uint8_t, 1> flags{};
    TraceParent parsed;
    if (!read_hex(value, 0, version) || !read_hex(value, 3, parsed.trace_id) || !read_hex(value, 36, parsed.parent_id) ||
        !read_hex(value, 53, flags)) {
        return std::nullopt;
    }
    if (version[0] == 0xff) return std::nullopt;
    if (version[0] == 0 ? value.size() != 55 : value.size() > 55 && value[55] != '-') return std::nullopt;
    if (all_zero(parsed.trace_id) || all_zero(parsed.parent_id)) return std::nullopt;
    parsed.sampled = (flags[0] & 0x01) != 0;
    return parsed;
}

std::string to_hex(const std::uint8_t* bytes, std::size_t size) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out;
    out.reserve(size * 2);
    for (std::size_t i = 0; i < size; ++i) {
        out.push_back(kDigits[bytes[i] >> 4]);
        out.push_back(kDigits[bytes[i] & 0x0f]);
    }
    return out;
}

std::string format_traceparent(const TraceId& trace_id, const SpanId& span_id, bool sampled) {
    return "00-" + to_hex(trace_id.data(), trace_id.size()) + "-" + to_hex(span_id.data(), span_id.size()) +
           (sampled ? "-01" : "-00");
}

TraceId random_trace_id() { return random_bytes<16>(); }
SpanId random_span_id() { return random_bytes<8>(); }

std::uint64_t now_unix_nano() {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count());
}

CallTrace start_call(const sdk::TraceContext& published, bool exporting) {
    CallTrace call;
    if (!exporting) {
        call.context = published;
        return call;
    }
    const std::optional<TraceParent> parent = parse_traceparent(published.traceparent);
    if (parent && !parent->sampled) {
        call.context = published;
        return call;
    }
    Span span;
    span.trace_id = parent ? parent->trace_id : random_trace_id();
    span.span_id = random_span_id();
    if (parent) {
        span.parent_span_id = parent->parent_id;
        span.trace_state = published.tracestate;
    }
    span.kind = SpanKind::Consumer;
    span.start_unix_nano = now_unix_nano();
    call.context.traceparent = format_traceparent(span.trace_id, span.span_id, true);
    call.context.tracestate = span.trace_state;
    call.span = std::move(span);
    return call;
}

void finish_call(Span& span, const std::string& event_type, const std::string& handler, int attempt,
                 std::string_view outcome, const std::string& error_code) {
    span.end_unix_nano = now_unix_nano();
    // Messaging conventions: "<operation> <destination>"; the event type is the destination.
    span.name = "process " + event_type;
    span.attributes = {{"messaging.system", std::string("outboxd")},
                       {"messaging.operation.type", std::string("process")},
                       {"outbox.event_type", event_type},
                       {"outbox.handler", handler},
                       {"outbox.attempt", static_cast<std::int64_t>(attempt)},
                       {"outbox.outcome", std::string(outcome)}};
    if (!error_code.empty()) {
        span.attributes.emplace_back("outbox.error_code", error_code);
        span.error = true;
        span.status_message = error_code;
    }
}

Span claim_span(std::uint64_t start_unix_nano, std::size_t claimed, bool suspect) {
    Span span;
    span.trace_id = random_trace_id();
    span.span_id = random_span_id();
    span.name = "claim";
    span.kind = SpanKind::Internal;
    span.start_unix_nano = start_unix_nano;
    span.end_unix_nano = now_unix_nano();
    span.attributes = {{"outbox.claimed", static_cast<std::int64_t>(claimed)},
                       {"outbox.lane", std::string(suspect ? "suspect" : "normal")}};
    return span;
}

}  // namespace outbox::telemetry
