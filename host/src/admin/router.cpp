#include "admin/router.hpp"

#include "admin/error_mapping.hpp"

namespace outbox::admin {
namespace {

std::vector<std::string> split_pattern(std::string_view pattern) {
    std::vector<std::string> segments;
    if (!pattern.empty() && pattern.front() == '/') pattern.remove_prefix(1);
    while (true) {
        const auto slash = pattern.find('/');
        std::string segment(pattern.substr(0, slash));
        if (segment.size() >= 2 && segment.front() == '{' && segment.back() == '}') segment = "{}";
        segments.push_back(std::move(segment));
        if (slash == std::string_view::npos) break;
        pattern.remove_prefix(slash + 1);
    }
    return segments;
}

}  // namespace

void Router::add(std::string method, std::string_view pattern, RouteHandler handler, Lane lane) {
    routes_.push_back({std::move(method), split_pattern(pattern), std::move(handler), lane});
}

bool Router::match(const Route& route, std::string_view path, PathParams* params) {
    if (path.empty() || path.front() != '/') return false;
    path.remove_prefix(1);
    std::size_t index = 0;
    while (true) {
        if (index == route.segments.size()) return false;
        const auto slash = path.find('/');
        const std::string_view segment = path.substr(0, slash);
        const std::string& expected = route.segments[index];
        if (expected == "{}") {
            if (segment.empty()) return false;
            if (params != nullptr) params->emplace_back(segment);
        } else if (segment != expected) {
            return false;
        }
        ++index;
        if (slash == std::string_view::npos) break;
        path.remove_prefix(slash + 1);
    }
    return index == route.segments.size();
}

Lane Router::lane(const HttpRequest& request) const {
    if (request.path.size() > kMaxPathBytes) return Lane::Api;
    const std::string_view method = request.method == "HEAD" ? std::string_view("GET") : request.method;
    for (const auto& route : routes_) {
        if (route.method == method && match(route, request.path, nullptr)) return route.lane;
    }
    return Lane::Api;
}

void Router::dispatch(const HttpRequest& request, HttpResponse& response) const {
    if (request.path.size() > kMaxPathBytes) {
        response = transport_error(414);
        return;
    }
    const std::string_view method = request.method == "HEAD" ? std::string_view("GET") : request.method;
    std::string allowed;
    for (const auto& route : routes_) {
        PathParams params;
        if (!match(route, request.path, &params)) continue;
        if (route.method == method) {
            route.handler(request, response, params);
            return;
        }
        allowed += (allowed.empty() ? "" : ", ") + route.method;
    }
    if (allowed.empty()) {
        send_error(response, 404, "NOT_FOUND", "no such endpoint");
    } else {
        response.set_header("Allow", allowed);
        send_error(response, 405, "METHOD_NOT_ALLOWED", "this path accepts " + allowed);
    }
}

}  // namespace outbox::admin
