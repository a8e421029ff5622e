#include "log/log.hpp"

#include <atomic>

#include <nlohmann/json.hpp>
#include <spdlog/sinks/stdout_sinks.h>

namespace outbox::log {
namespace {
std::atomic<bool> g_json{false};

void add_text(std::string& line, std::string_view key, std::string_view value) {
    if (value.empty()) return;
    line.append(" ").append(key).append("=").append(value);
}
}  // namespace

std::string escape_control(std::string_view text) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    out.reserve(text.size());
    for (const char c : text) {
        const auto byte = static_cast<unsigned char>(c);
        if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\t') {
            out += "\\t";
        } else if (byte < 0x20 || byte == 0x7f) {
            out += "\\x";
            out += kHex[byte >> 4];
            out += kHex[byte & 0x0f];
        } else {
            out += c;
        }
    }
    return out;
}

void init(const std::string& level, const std::string& format) {
    g_json = format == "json";
    spdlog::drop("outboxd");
    auto logger = spdlog::stderr_logger_mt("outboxd");
    if (g_json) {
        logger->set_pattern(R"({"ts":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l",%v})", spdlog::pattern_time_type::utc);
    } else {
        logger->set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %^%-5l%$ %v", spdlog::pattern_time_type::utc);
    }
    logger->set_level(spdlog::level::from_str(level));
    logger->flush_on(spdlog::level::info);
    spdlog::set_default_logger(logger);
}

void write(spdlog::level::level_enum level, std::string_view message, const Fields& f) {
    if (!spdlog::default_logger_raw()->should_log(level)) return;
    std::string line;
    if (g_json) {
        nlohmann::json object{{"msg", message}};
        if (!f.event_id.empty()) object["event_id"] = f.event_id;
        if (!f.event_type.empty()) object["event_type"] = f.event_type;
        if (!f.handler.empty()) object["handler"] = f.handler;
        if (f.attempt > 0) object["attempt"] = f.attempt;
        if (!f.code.empty()) object["code"] = f.code;
        if (!f.file.empty()) object["file"] = f.file;
        line = object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        line = line.substr(1, line.size() - 2);  // the pattern supplies the braces
    } else {
        line.assign(message);
        add_text(line, "event_id", f.event_id);
        add_text(line, "event_type", f.event_type);
        add_text(line, "handler", f.handler);
        if (f.attempt > 0) add_text(line, "attempt", std::to_string(f.attempt));
        add_text(line, "code", f.code);
        add_text(line, "file", f.file);
        // Messages carry text from plugins (ctx.log) and libraries (dlerror); a CR, LF or
        // escape sequence in it must not forge or hide lines of a text log.
        line = escape_control(line);
    }
    spdlog::default_logger_raw()->log(level, "{}", line);
}

}  // namespace outbox::log
