#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "admin/router.hpp"
#include "config/config.hpp"

namespace outbox::admin {

/// Limits the transport enforces before a request reaches the router (and so before
/// authentication). Every refusal is answered with its status and the JSON error shape.
struct TransportOptions {
    int threads = 8;                                   // API request workers
    std::size_t max_queued = 32;                       // API requests waiting for a worker; more: 503 BUSY
    std::size_t max_body_bytes = 16 * 1024;            // Content-Length above this: 413
    std::size_t max_request_line = 8 * 1024;           // longer request line: 414
    std::size_t max_headers = 64;                      // more header fields: 431
    std::size_t max_header_bytes = 16 * 1024;          // more header bytes: 431
    std::chrono::milliseconds request_timeout{10000};  // the whole request (line, headers, body) must arrive within this
    std::chrono::seconds io_timeout{5};                // writing an answer
    std::chrono::seconds keep_alive_timeout{2};        // an idle keep-alive connection is closed after this
    int max_connections_per_client = 32;               // more from one address: 503 TOO_MANY_CONNECTIONS
    int max_connections = 512;                         // more in total: 503 TOO_MANY_CONNECTIONS
    // Beyond those caps a few connections are still taken for probes alone, so a flood of
    // API connections never fails a liveness or readiness probe: each must send its head
    // within probe_head_timeout and may only ask a probe path; one client (an IPv6 /64)
    // holds at most probe_connections_per_client of them.
    int probe_connections = 64;
    int probe_connections_per_client = 2;
    std::chrono::milliseconds probe_head_timeout{1000};
    std::vector<std::string> probe_paths{"/healthz", "/readyz"};
    std::function<void()> on_refused;                  // a connection refused at once (counted by the caller)
    int io_threads = 2;                                // socket I/O; probes on Lane::Inline run here
    int probe_threads = 2;                             // Lane::Probe routes, never queued behind the API
};

/// The HTTP/1.1 listener (Boost.Beast over Asio). Reads each request head itself, byte
/// limits checked as the bytes arrive, so no request line, header block or body larger
/// than the limits is ever held in memory; a deadline per request that trickling cannot
/// extend; chunked and encoded request bodies refused. Nothing outside this file sees the
/// HTTP library.
class HttpTransport {
public:
    HttpTransport(TransportOptions options, const Router& router);
    ~HttpTransport();
    HttpTransport(const HttpTransport&) = delete;
    HttpTransport& operator=(const HttpTransport&) = delete;

    /// Binds; returns the bound port. Throws AdminStartError naming the address.
    int bind(const config::ListenAddress& address);
    /// Serves on background threads until stop().
    void serve();
    /// Stops accepting, lets running requests finish, closes every connection, joins.
    /// Idempotent.
    void stop();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

/// "host:port", with brackets around an IPv6 host.
std::string display(const config::ListenAddress& address);

}  // namespace outbox::admin
