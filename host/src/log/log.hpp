#pragma once

#include <string>
#include <string_view>

#include <spdlog/spdlog.h>

namespace outbox::log {

/// Configures the process logger: `level` trace|debug|info|warn|error, `format` text|json
/// (one JSON object per line). Called once at start-up; safe to call again in tests.
void init(const std::string& level, const std::string& format);

/// Structured context of one log line. Only identifiers and safe codes go here, never a
/// payload, a token or exception text.
struct Fields {
    std::string_view event_id{};
    std::string_view event_type{};
    std::string_view handler{};
    int attempt = 0;
    std::string_view code{};
    std::string_view file{};  // a plugin file
};

/// `text` with CR, LF, TAB and every other ASCII control character written as \r, \n, \t
/// or \xNN, C1 controls, U+2028/U+2029 and bidirectional controls as \uNNNN, and bytes
/// that are not UTF-8 as \xNN, so it stays on one line and shows what it holds.
std::string escape_control(std::string_view text);

/// Logs `message` with `fields` in the configured format. In text format a field's value is
/// quoted ("...", with \" and \\) when it holds a space, '=' or '"', and the whole line is
/// passed through escape_control (JSON escapes them itself).
void write(spdlog::level::level_enum level, std::string_view message, const Fields& fields = {});

inline void info(std::string_view message, const Fields& fields = {}) { write(spdlog::level::info, message, fields); }
inline void warn(std::string_view message, const Fields& fields = {}) { write(spdlog::level::warn, message, fields); }
inline void error(std::string_view message, const Fields& fields = {}) { write(spdlog::level::err, message, fields); }
inline void debug(std::string_view message, const Fields& fields = {}) { write(spdlog::level::debug, message, fields); }

}  // namespace outbox::log
