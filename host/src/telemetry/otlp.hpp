#pragma once

#include <string>
#include <vector>

#include "telemetry/span.hpp"

namespace outbox::telemetry {

/// An OTLP/HTTP trace export body (opentelemetry.proto.collector.trace.v1
/// .ExportTraceServiceRequest, binary protobuf, Content-Type application/x-protobuf): one
/// resource (service.name, service.version, service.instance.id: the host id) and one instrumentation scope
/// ("outboxd") holding `spans`. Written by hand: the few messages are fixed, and Debian
/// packages no OpenTelemetry definitions to generate them from.
std::string encode_export_request(const std::vector<Span>& spans, const std::string& service_name,
                                  const std::string& service_version, const std::string& instance_id);

}  // namespace outbox::telemetry
