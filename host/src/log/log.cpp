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
    }
    spdlog::default_logger_raw()->log(level, "{}", line);
}

}  // namespace outbox::log
