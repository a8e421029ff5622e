#pragma once
// The nats-relay plugin's configuration (handlers.nats-relay.config) and the pure rules it
// depends on: subjects, stream names, durations. No NATS client code here.

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace nats_relay {

/// A configuration value the plugin cannot run with. Thrown by the constructor, so the host
/// (and `outboxd plugins check --config`) refuses the plugin file; the message names the
/// key, never a secret.
class InvalidConfig : public std::invalid_argument {
public:
    using std::invalid_argument::invalid_argument;
};

struct Settings {
    std::vector<std::string> servers;       ///< nats:// or tls:// URLs, without credentials
    std::string token;                      ///< from the variable named by token_env; empty for none
    std::string credentials_file;           ///< a NATS .creds file; empty for none
    std::string stream;                     ///< the stream every subject must land in
    std::string subject_template;           ///< with <company> and <event_type>
    std::vector<std::string> event_types;   ///< what this handler relays
    std::chrono::milliseconds publish_timeout{std::chrono::seconds{5}};
};

inline constexpr const char* kDefaultSubjectTemplate = "outbox.<company>.<event_type>";

/// Parses and checks the config JSON. Reads the token's environment variable and checks
/// that the credentials file is readable; connects to nothing. Throws InvalidConfig.
Settings parse_settings(const std::string& config_json);

/// The subject for one event, or nullopt when the company id cannot be a subject token
/// (empty, or holding '.', '*', '>', whitespace or control characters).
std::optional<std::string> render_subject(const std::string& subject_template, const std::string& company,
                                          const std::string& event_type);

/// A subject NATS accepts for publishing: non-empty tokens separated by '.', no wildcards,
/// no whitespace or control characters.
bool valid_publish_subject(std::string_view subject);

/// NATS subject matching: '*' matches one token, a final '>' one or more.
bool subject_matches(std::string_view pattern, std::string_view subject);

}  // namespace nats_relay
