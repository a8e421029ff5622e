#include "outbox_examples/ai_classifier_server.hpp"

#include <array>
#include <cctype>
#include <cstdint>

#include <nlohmann/json.hpp>

namespace outbox::examples {
namespace {

constexpr std::array<const char*, 8> kCategories{"news",   "shopping", "education", "entertainment",
                                                 "finance", "travel",  "health",    "technology"};

bool is_host_name(std::string_view domain) {
    if (domain.empty() || domain.size() > 253 || domain.find('.') == std::string_view::npos) return false;
    if (domain.front() == '.' || domain.back() == '.' || domain.find("..") != std::string_view::npos) return false;
    for (const char c : domain) {
        const auto u = static_cast<unsigned char>(c);
        if (!(std::isalnum(u) || c == '-' || c == '.')) return false;
    }
    return true;
}

}  // namespace

AiClassifierServer::AiClassifierServer(std::string api_key, FaultConfig faults)
    : FaultyHttpService("ai-classifier", faults), api_key_(std::move(api_key)) {
    post_route("/v1/classify",
               [this](const httplib::Request& request, const std::function<void()>& work) {
                   return classify(request, work);
               });
    server().Get("/v1/stats", [this](const httplib::Request&, httplib::Response& response) {
        nlohmann::json stats;
        stats["calls"] = call_count();
        stats["max_calls_in_any_second"] = max_calls_in_window(std::chrono::seconds{1});
        nlohmann::json by_status = nlohmann::json::object();
        for (const auto& [status, count] : responses_by_status()) by_status[std::to_string(status)] = count;
        stats["responses"] = by_status;
        stats["outcomes"] = calls_by_outcome();
        response.set_content(stats.dump(), "application/json");
    });
}

std::string AiClassifierServer::category_for(std::string_view domain) {
    std::uint64_t hash = 1469598103934665603ull;  // FNV-1a: stable across runs and platforms
    for (const char c : domain) {
        hash ^= static_cast<unsigned char>(std::tolower(static_cast<unsigned char>(c)));
        hash *= 1099511628211ull;
    }
    return kCategories[hash % kCategories.size()];
}

FaultyHttpService::Reply AiClassifierServer::classify(const httplib::Request& request,
                                                      const std::function<void()>& work) const {
    if (api_key_.empty() || request.get_header_value("Authorization") != "Bearer " + api_key_) {
        return {401, R"({"error":"missing or wrong API key"})"};
    }
    const nlohmann::json body = nlohmann::json::parse(request.body, nullptr, false);
    if (!body.is_object() || !body.contains("domain") || !body["domain"].is_string()) {
        return {400, R"({"error":"expected {\"domain\": \"...\"}"})"};
    }
    const std::string domain = body["domain"].get<std::string>();
    if (!is_host_name(domain)) return {422, R"({"error":"domain is not a host name"})"};
    work();
    return {200, nlohmann::json{{"category", category_for(domain)}}.dump()};
}

}  // namespace outbox::examples
