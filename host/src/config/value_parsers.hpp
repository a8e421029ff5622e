#pragma once

// One written value on its way into Config: the parsers of each kind of value, and the
// one-line errors that name the key, where the value came from and what is allowed.

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"
#include "core/parse_number.hpp"

namespace outbox::config {

// A value as written, with where it was written ("outboxd.yaml:12" or "OUTBOX_BATCH_SIZE"),
// so every error can point at the exact line or variable to fix.
struct Raw {
    std::string text;
    std::string origin;
};

// One value on its way into Config: the key it sets and where it came from.
struct Value {
    std::string_view key;
    const Raw& raw;
    bool from_env = false;
};

// "<key> = <value> (from <origin>): <allowed>", the value shortened and JSON-quoted.
[[noreturn]] void fail(std::string_view key, const Raw& raw, std::string_view allowed);
[[noreturn]] void fail(const Value& v, std::string_view allowed);
// "<key> (from <origin>): <problem>", for what has no single value to quote.
[[noreturn]] void fail_at(std::string_view key, std::string_view origin, std::string_view problem);

std::string lower(std::string_view text);

// Each parser returns the value or throws ConfigError through fail(v, "expected ...").
milliseconds to_duration(const Value& v, milliseconds lo, milliseconds hi);
int to_int(const Value& v, int lo, int hi);
bool to_bool(const Value& v);
std::vector<std::string> to_roles(const Value& v);
std::string to_header_name(const Value& v);
std::string to_choice(const Value& v, std::initializer_list<std::string_view> choices);
std::optional<ListenAddress> to_listen(const Value& v);
double to_rate(const Value& v);
double to_ratio(const Value& v);  // in (0, 1]
std::string to_otlp_endpoint(const Value& v);
std::string to_service_name(const Value& v);

}  // namespace outbox::config
