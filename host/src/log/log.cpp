#include "log/log.hpp"

#include <atomic>

#include <nlohmann/json.hpp>
#include <spdlog/sinks/stdout_sinks.h>

namespace outbox::log {
namespace {
std::atomic<bool> g_json{false};

// A value with a space, '=' or '"' is quoted, so text from a plugin or a library cannot
// pose as further key=value fields.
void add_text(std::string& line, std::string_view key, std::string_view value) {
    if (value.empty()) return;
    line.append(" ").append(key).append("=");
    if (value.find_first_of(" =\"") == std::string_view::npos) {
        line.append(value);
        return;
    }
    line += '"';
    for (const char c : value) {
        if (c == '"' || c == '\\') line += '\\';
        line += c;
    }
    line += '"';
}

constexpr char kHex[] = "0123456789abcdef";

void append_byte(std::string& out, unsigned char byte) {
    out += "\\x";
    out += kHex[byte >> 4];
    out += kHex[byte & 0x0f];
}

// C1 controls, line and paragraph separators and bidirectional controls: a terminal or an
// editor acts on them (U+009B is CSI; U+202E reverses what follows).
bool invisible_control(char32_t cp) {
    return (cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 || cp == 0x061c || cp == 0x200e ||
           cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

// The length of the well-formed UTF-8 sequence at the start of `text` and its code point,
// or 0 when it is not one.
std::size_t utf8_sequence(std::string_view text, char32_t& cp) {
    const auto lead = static_cast<unsigned char>(text[0]);
    std::size_t length = 0;
    unsigned char low = 0x80, high = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
        length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        length = 3;
        if (lead == 0xE0) low = 0xA0;
        if (lead == 0xED) high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        length = 4;
        if (lead == 0xF0) low = 0x90;
        if (lead == 0xF4) high = 0x8F;
    } else {
        return 0;
    }
    if (text.size() < length) return 0;
    cp = lead & (length == 2 ? 0x1F : length == 3 ? 0x0F : 0x07);
    for (std::size_t k = 1; k < length; ++k) {
        const auto next = static_cast<unsigned char>(text[k]);
        if (next < (k == 1 ? low : 0x80) || next > (k == 1 ? high : 0xBF)) return 0;
        cp = (cp << 6) | (next & 0x3F);
    }
    return length;
}

}  // namespace

std::string escape_control(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
        const char c = text[i];
        const auto byte = static_cast<unsigned char>(c);
        if (byte < 0x80) {
            if (c == '\n') {
                out += "\\n";
            } else if (c == '\r') {
                out += "\\r";
            } else if (c == '\t') {
                out += "\\t";
            } else if (byte < 0x20 || byte == 0x7f) {
                append_byte(out, byte);
            } else {
                out += c;
            }
            ++i;
            continue;
        }
        char32_t cp = 0;
        const std::size_t length = utf8_sequence(text.substr(i), cp);
        if (length == 0) {
            append_byte(out, byte);  // not UTF-8: a lone 0x9b would still be CSI to some terminals
            ++i;
        } else if (invisible_control(cp)) {
            out += "\\u";
            for (int shift = 12; shift >= 0; shift -= 4) out += kHex[(cp >> shift) & 0x0f];
            i += length;
        } else {
            out.append(text.substr(i, length));
            i += length;
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
