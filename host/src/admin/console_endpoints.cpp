// The operator console: static HTML, CSS and JavaScript compiled into the binary
// (console_files), served on the admin listener. The pages hold no privilege of their own:
// everything they show or do goes through the API with the operator's token, so these routes
// need no authentication. The one dynamic route, /console/session, only hands back the
// token a reverse proxy put into the configured request header.
#include <algorithm>

#include "admin/console_files.hpp"
#include "admin/endpoints.hpp"

namespace outbox::admin {
namespace {

using nlohmann::json;

// No inline script or style and nothing from another origin; the page may not be framed.
constexpr const char* kContentSecurityPolicy =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

void set_console_headers(HttpResponse& res) {
    res.set_header("Content-Security-Policy", kContentSecurityPolicy);
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("Referrer-Policy", "no-referrer");
    res.set_header("Cache-Control", "no-store");
}

std::string_view content_type(std::string_view name) {
    const auto ends_with = [&](std::string_view suffix) {
        return name.size() >= suffix.size() && name.substr(name.size() - suffix.size()) == suffix;
    };
    if (ends_with(".html")) return "text/html; charset=utf-8";
    if (ends_with(".css")) return "text/css; charset=utf-8";
    if (ends_with(".js")) return "text/javascript; charset=utf-8";
    if (ends_with(".svg")) return "image/svg+xml";
    if (ends_with(".png")) return "image/png";
    return "application/octet-stream";
}

void serve_file(HttpResponse& res, std::string_view name) {
    const auto& files = console_files();
    const auto found =
        std::find_if(files.begin(), files.end(), [&](const ConsoleFile& file) { return file.name == name; });
    if (found == files.end()) {
        send_error(res, 404, "NOT_FOUND", "no such console file");
        return;
    }
    set_console_headers(res);
    res.status = 200;
    res.content_type = std::string(content_type(found->name));
    res.body = std::string(found->content);  // the transport drops it for HEAD
}

void mark_proxy_session(HttpResponse& res) {
    constexpr std::string_view kOff = R"(<meta name="outboxd-proxy-session" content="off">)";
    const auto at = res.body.find(kOff);
    if (at != std::string::npos) res.body.replace(at, kOff.size(), R"(<meta name="outboxd-proxy-session" content="on">)");
}

// The proxy's token, so an operator it signed in needs no paste. 404 when no header is
// configured or the request does not carry it: the page then shows the sign-in form.
void session(const AdminContext& context, const HttpRequest& req, HttpResponse& res) {
    set_console_headers(res);
    const std::string& header = context.options().console_token_header;
    const auto token = header.empty() ? std::nullopt : req.header(header);
    if (!token || token->empty()) {
        send_error(res, 404, "NO_CONSOLE_SESSION",
                   header.empty() ? "admin.console_token_header is not configured"
                                  : "the request carries no " + header + " header");
        return;
    }
    // The proxy puts a JWT there; anything else is not passed on to the page.
    if (!is_compact_jws(*token)) {
        send_error(res, 400, "INVALID_CONSOLE_TOKEN", "the " + header + " header does not hold a JWT");
        return;
    }
    res.status = 200;
    res.body = json_body(json{{"token", *token}});
}

}  // namespace

void add_console_endpoints(Router& router, AdminContext& context) {
    // Registered before /console/{file}: the router takes the first route that matches.
    router.add(
        "GET", "/console/session",
        [&context](const HttpRequest& req, HttpResponse& res, const PathParams&) { session(context, req, res); },
        Lane::Inline);
    router.add(
        "GET", "/console",
        [](const HttpRequest&, HttpResponse& res, const PathParams&) {
            set_console_headers(res);
            res.status = 308;
            res.content_type = "text/plain; charset=utf-8";
            res.set_header("Location", "/console/");
            res.body = "/console/\n";
        },
        Lane::Inline);
    router.add(
        "GET", "/console/",
        [&context](const HttpRequest&, HttpResponse& res, const PathParams&) {
            serve_file(res, "index.html");
            // The page asks /console/session only when a proxy header is configured.
            if (!context.options().console_token_header.empty()) mark_proxy_session(res);
        },
        Lane::Inline);
    router.add(
        "GET", "/console/{file}",
        [&context](const HttpRequest&, HttpResponse& res, const PathParams& params) {
            serve_file(res, params.at(0));
            if (params.at(0) == "index.html" && !context.options().console_token_header.empty()) mark_proxy_session(res);
        },
        Lane::Inline);
}

}  // namespace outbox::admin
