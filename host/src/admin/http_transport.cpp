#include "admin/http_transport.hpp"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include <httplib.h>

#include "admin/admin_server.hpp"
#include "admin/bounded_task_queue.hpp"
#include "admin/error_mapping.hpp"
#include "log/log.hpp"

namespace outbox::admin {
namespace {

HttpRequest to_request(const httplib::Request& req) {
    HttpRequest out;
    out.method = req.method;
    out.path = req.path;
    for (const auto& [key, value] : req.params) out.query.emplace_back(key, value);
    for (const auto& [key, value] : req.headers) out.headers.emplace_back(key, value);
    out.body = req.body;
    return out;
}

void write(const HttpResponse& from, httplib::Response& to) {
    to.status = from.status;
    for (const auto& [key, value] : from.headers) to.set_header(key.c_str(), value);
    to.set_content(from.body, from.content_type.c_str());
}

}  // namespace

std::string display(const config::ListenAddress& address) {
    const bool v6 = address.host.find(':') != std::string::npos;
    return (v6 ? "[" + address.host + "]" : address.host) + ":" + std::to_string(address.port);
}

struct HttpTransport::Impl {
    TransportOptions options;
    const Router& router;
    httplib::Server server;
    std::thread thread;
    bool serving = false;

    Impl(TransportOptions o, const Router& r) : options(o), router(r) {}

    void configure() {
        const auto threads = static_cast<std::size_t>(options.threads < 1 ? 1 : options.threads);
        server.new_task_queue = [threads] { return new BoundedTaskQueue(threads, threads * 4); };
        server.set_payload_max_length(options.max_body_bytes);
        server.set_read_timeout(options.io_timeout);
        server.set_write_timeout(options.io_timeout);
        server.set_keep_alive_timeout(options.keep_alive_timeout.count());
        server.set_keep_alive_max_count(100);
        // SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, which would let a
        // second host bind the same port silently instead of failing at start-up.
        server.set_socket_options([](socket_t sock) {
            int yes = 1;
            ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
        });
        const auto dispatch = [this](const httplib::Request& req, httplib::Response& res) {
            HttpResponse response;
            router.dispatch(to_request(req), response);
            write(response, res);
        };
        server.Get(".*", dispatch);
        server.Post(".*", dispatch);
        server.Put(".*", dispatch);
        server.Patch(".*", dispatch);
        server.Delete(".*", dispatch);
        server.Options(".*", dispatch);
        // Runs for every 4xx/5xx, including those httplib produces itself (400 bad request
        // line, 413, 414, 404 for methods it does not route): give them the JSON shape.
        server.set_error_handler(httplib::Server::HandlerWithResponse(
            [this](const httplib::Request& req, httplib::Response& res) {
                if (!res.body.empty()) return httplib::Server::HandlerResponse::Handled;
                HttpResponse response;
                if (res.status == 404) {
                    router.dispatch(to_request(req), response);
                    if (response.status == 200) response = transport_error(404);
                } else {
                    response = transport_error(res.status, options.max_body_bytes);
                }
                write(response, res);
                return httplib::Server::HandlerResponse::Handled;
            }));
        server.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr) {
            // The path is not logged: it is caller-controlled text.
            log::error("admin API: unexpected failure handling a " + req.method + " request");
            write(transport_error(500), res);
        });
    }
};

HttpTransport::HttpTransport(TransportOptions options, const Router& router)
    : impl_(std::make_unique<Impl>(options, router)) {}

HttpTransport::~HttpTransport() { stop(); }

int HttpTransport::bind(const config::ListenAddress& address) {
    Impl& s = *impl_;
    s.configure();
    errno = 0;
    int port = -1;
    if (address.port == 0) {
        port = s.server.bind_to_any_port(address.host);
    } else if (s.server.bind_to_port(address.host, address.port)) {
        port = address.port;
    }
    if (port <= 0) {
        const int error = errno;
        throw AdminStartError("cannot listen on " + display(address) +
                              (error != 0 ? ": " + std::string(std::strerror(error)) : "") +
                              " (admin.listen / OUTBOX_ADMIN_LISTEN; \"off\" disables the listener)");
    }
    return port;
}

void HttpTransport::serve() {
    Impl& s = *impl_;
    s.serving = true;
    s.thread = std::thread([&s] { s.server.listen_after_bind(); });
    // stop() is a no-op until the accept loop runs; wait for it so start/stop cannot race.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{5};
    while (!s.server.is_running() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds{1});
    }
}

void HttpTransport::stop() {
    Impl& s = *impl_;
    if (!s.serving) return;
    s.serving = false;
    s.server.stop();
    if (s.thread.joinable()) s.thread.join();
}

}  // namespace outbox::admin
