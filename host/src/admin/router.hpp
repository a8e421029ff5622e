#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "admin/http_message.hpp"

namespace outbox::admin {

/// Values of a route's {placeholders}, in order.
using PathParams = std::vector<std::string>;
using RouteHandler = std::function<void(const HttpRequest&, HttpResponse&, const PathParams&)>;

/// Where a route runs: Api on the bounded request workers, Probe on a small executor of
/// its own, Inline on the I/O thread (no blocking work). Probes never wait behind API
/// requests, so a busy API cannot make a host look dead.
enum class Lane { Api, Probe, Inline };

/// Routes requests by comparing path segments with each route's pattern, literal segments
/// exactly and "{name}" segments to any one non-empty segment. No regular expressions and
/// no recursion: the work is linear in the path's length, and paths longer than
/// kMaxPathBytes are refused (414) before any matching.
class Router {
public:
    static constexpr std::size_t kMaxPathBytes = 2048;

    /// `pattern`: e.g. "/api/v1/admin/outbox-events/{id}/retry".
    void add(std::string method, std::string_view pattern, RouteHandler handler, Lane lane = Lane::Api);

    /// The lane of the route `request` goes to; Api when none matches (the answer is then
    /// an error made without the database).
    [[nodiscard]] Lane lane(const HttpRequest& request) const;

    /// Runs the matching route, or answers 404 NOT_FOUND, 405 METHOD_NOT_ALLOWED (with
    /// Allow) or 414 URI_TOO_LONG. HEAD is routed as GET.
    void dispatch(const HttpRequest& request, HttpResponse& response) const;

private:
    struct Route {
        std::string method;
        std::vector<std::string> segments;  // "{}" marks a placeholder
        RouteHandler handler;
        Lane lane;
    };
    static bool match(const Route& route, std::string_view path, PathParams* params);

    std::vector<Route> routes_;
};

}  // namespace outbox::admin
