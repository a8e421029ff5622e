#pragma once

// The one place configuration keys are declared (the tables are in settings_table.cpp).
// Reading (config.cpp) and the reference (config_reference.cpp) both walk them in order.

#include <array>
#include <cstddef>
#include <span>
#include <string_view>

#include "config/config.hpp"
#include "config/value_parsers.hpp"

namespace outbox::config {

// Every scalar key is declared once, as a row of kSettings: its variable, its parser (with
// its range) and what the reference documents. `outboxd config reference` prints this table,
// so adding a row is all a new key needs. What a key accepts is not written twice: the
// reference shows the parser's own "expected ..." text (see allowed_text() in
// config_reference.cpp), unless `type` says it.
struct Setting {
    std::string_view key;  // "outbox.poll_interval"
    std::string_view env;  // its OUTBOX_* override
    void (*apply)(Config&, const Value&);
    std::string_view default_value = {};  // as written in the file; "(...)": derived at run time
    std::string_view description = {};   // Markdown, one line
    std::string_view type = {};           // only for values the parser takes as free text
};

constexpr std::string_view kSecretEnv = "OUTBOX_ADMIN_JWT_SECRET";
constexpr std::size_t kMinSecretBytes = 32;  // HS256 keys shorter than its 256-bit output are guessable offline
constexpr std::array<std::string_view, 8> kSections{"database", "outbox", "plugins", "admin", "telemetry", "log",
                                                    "tenants", "handlers"};

// The keys of a `handlers.<name>` section, declared like kSettings (file only, no variable).
// `config` is a mapping handed to the plugin; `circuit_breaker` is a mapping of the keys
// named `circuit_breaker.<key>`; the others are scalars parsed by `apply`.
struct HandlerKey {
    std::string_view name;
    void (*apply)(HandlerSettings&, const Value&);
    std::string_view default_value;
    std::string_view description;
    std::string_view type = {};
};

// The keys of a `tenants.companies.<company_id>` section (file only, no variable).
struct TenantKey {
    std::string_view name;
    void (*apply)(TenantSettings&, const Value&);
    std::string_view default_value;
    std::string_view description;
};

/// kSettings: every scalar key, in the order the reference lists them.
std::span<const Setting> settings_table();
/// kHandlerKeys: the keys of a `handlers.<name>` section, in reference order.
std::span<const HandlerKey> handler_keys();
/// kTenantKeys: the keys of a `tenants.companies.<company_id>` section, in reference order.
std::span<const TenantKey> tenant_keys();

}  // namespace outbox::config
