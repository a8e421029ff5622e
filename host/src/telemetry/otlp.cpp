#include "telemetry/otlp.hpp"

#include <cstdint>

namespace outbox::telemetry {
namespace {

// Protobuf wire format: a field is a varint key (field number << 3 | wire type) and a value.
enum Wire : std::uint32_t { Varint = 0, Fixed64 = 1, Bytes = 2 };

void varint(std::string& out, std::uint64_t value) {
    while (value >= 0x80) {
        out.push_back(static_cast<char>((value & 0x7f) | 0x80));
        value >>= 7;
    }
    out.push_back(static_cast<char>(value));
}
void key(std::string& out, std::uint32_t field, Wire wire) { varint(out, (static_cast<std::uint64_t>(field) << 3) | wire); }
void bytes(std::string& out, std::uint32_t field, const void* data, std::size_t size) {
    key(out, field, Bytes);
    varint(out, size);
    out.append(static_cast<const char*>(data), size);
}
void text(std::string& out, std::uint32_t field, const std::string& value) { bytes(out, field, value.data(), value.size()); }
void fixed64(std::string& out, std::uint32_t field, std::uint64_t value) {
    key(out, field, Fixed64);
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(value >> (8 * i)));
}
void number(std::string& out, std::uint32_t field, std::uint64_t value) {
    key(out, field, Varint);
    varint(out, value);
}

// common.v1.KeyValue {key = 1; AnyValue value = 2} with AnyValue {string_value = 1;
// bool_value = 2; int_value = 3}.
std::string key_value(const std::string& name, const AttributeValue& value) {
    std::string any;
    if (const auto* s = std::get_if<std::string>(&value)) text(any, 1, *s);
    if (const auto* b = std::get_if<bool>(&value)) number(any, 2, *b ? 1 : 0);
    if (const auto* i = std::get_if<std::int64_t>(&value)) number(any, 3, static_cast<std::uint64_t>(*i));
    std::string out;
    text(out, 1, name);
    text(out, 2, any);
    return out;
}

// trace.v1.Span
std::string span(const Span& s) {
    std::string out;
    bytes(out, 1, s.trace_id.data(), s.trace_id.size());
    bytes(out, 2, s.span_id.data(), s.span_id.size());
    if (!s.trace_state.empty()) text(out, 3, s.trace_state);
    if (s.parent_span_id) bytes(out, 4, s.parent_span_id->data(), s.parent_span_id->size());
    text(out, 5, s.name);
    number(out, 6, static_cast<std::uint64_t>(s.kind));
    fixed64(out, 7, s.start_unix_nano);
    fixed64(out, 8, s.end_unix_nano);
    for (const auto& [name, value] : s.attributes) text(out, 9, key_value(name, value));
    if (s.error) {
        std::string status;  // Status {message = 2; code = 3}, code 2 = ERROR
        if (!s.status_message.empty()) text(status, 2, s.status_message);
        number(status, 3, 2);
        text(out, 15, status);
    }
    return out;
}

}  // namespace

std::string encode_export_request(const std::vector<Span>& spans, const std::string& service_name,
                                  const std::string& service_version, const std::string& instance_id) {
    std::string resource;  // resource.v1.Resource {attributes = 1}
    text(resource, 1, key_value("service.name", service_name));
    text(resource, 1, key_value("service.version", service_version));
    if (!instance_id.empty()) text(resource, 1, key_value("service.instance.id", instance_id));
    std::string scope;  // common.v1.InstrumentationScope {name = 1; version = 2}
    text(scope, 1, "outboxd");
    text(scope, 2, service_version);
    std::string scope_spans;  // trace.v1.ScopeSpans {scope = 1; spans = 2}
    text(scope_spans, 1, scope);
    for (const Span& s : spans) text(scope_spans, 2, span(s));
    std::string resource_spans;  // trace.v1.ResourceSpans {resource = 1; scope_spans = 2}
    text(resource_spans, 1, resource);
    text(resource_spans, 2, scope_spans);
    std::string request;  // collector.trace.v1.ExportTraceServiceRequest {resource_spans = 1}
    text(request, 1, resource_spans);
    return request;
}

}  // namespace outbox::telemetry
