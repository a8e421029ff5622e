#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>

#include "admin/http_message.hpp"
#include "admin/router.hpp"
#include "config/config.hpp"

namespace outbox::admin {

struct TransportOptions {
    int threads = 8;                             // API request workers
    std::size_t max_body_bytes = 16 * 1024;      // larger bodies get 413
    std::chrono::seconds io_timeout{5};          // read and write limit per request
    std::chrono::seconds keep_alive_timeout{2};  // an idle keep-alive connection is closed after this
};

/// The HTTP listener: reads requests into HttpRequest within its limits, answers the
/// refusals it makes itself with the JSON error shape, and hands everything else to the
/// router. Nothing outside this file sees the HTTP library.
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
    /// Stops accepting, finishes running requests, joins. Idempotent.
    void stop();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

/// "host:port", with brackets around an IPv6 host.
std::string display(const config::ListenAddress& address);

}  // namespace outbox::admin
