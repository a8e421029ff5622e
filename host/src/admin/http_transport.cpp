#include "admin/http_transport.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>

#include "admin/admin_server.hpp"
#include "admin/bounded_task_queue.hpp"
#include "admin/error_mapping.hpp"
#include "log/log.hpp"

namespace outbox::admin {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

// After an answer that closes the connection, unread input is drained for at most this
// long (and this many bytes) before closing, so the client reads the answer instead of a
// reset.
constexpr auto kLinger = std::chrono::seconds{1};
constexpr std::size_t kLingerBytes = 1024 * 1024;

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/// Percent-decodes `text`; with `plus_is_space` (query strings) '+' becomes ' '. Invalid
/// escapes are kept as written.
std::string decode(std::string_view text, bool plus_is_space) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '%' && i + 2 < text.size()) {
            const int hi = hex_value(text[i + 1]);
            const int lo = hex_value(text[i + 2]);
            if (hi >= 0 && lo >= 0) {
                out.push_back(static_cast<char>(hi * 16 + lo));
                i += 2;
                continue;
            }
        }
        out.push_back(plus_is_space && c == '+' ? ' ' : c);
    }
    return out;
}

void split_target(std::string_view target, HttpRequest& req) {
    const auto question = target.find('?');
    req.path = decode(target.substr(0, question), false);
    if (question == std::string_view::npos) return;
    std::string_view query = target.substr(question + 1);
    while (!query.empty()) {
        const auto amp = query.find('&');
        const std::string_view pair = query.substr(0, amp);
        if (!pair.empty()) {
            const auto eq = pair.find('=');
            req.query.emplace_back(decode(pair.substr(0, eq), true),
                                   eq == std::string_view::npos ? std::string() : decode(pair.substr(eq + 1), true));
        }
        if (amp == std::string_view::npos) break;
        query.remove_prefix(amp + 1);
    }
}

std::string_view std_view(beast::string_view text) { return {text.data(), text.size()}; }

/// Which caps a connection counts against: an IPv4 address, or an IPv6 /64 (one
/// subscriber's whole prefix, which a flood could otherwise rotate through).
std::string client_key(const asio::ip::address& address) {
    if (address.is_v6() && !address.to_v6().is_v4_mapped()) {
        auto bytes = address.to_v6().to_bytes();
        std::fill(bytes.begin() + 8, bytes.end(), 0);
        return asio::ip::address_v6(bytes).to_string() + "/64";
    }
    if (address.is_v6()) return asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6()).to_string();
    return address.to_string();
}

bool has_body_method(std::string_view method) { return method == "POST" || method == "PUT" || method == "PATCH"; }

/// A byte that may not appear in a request line (controls, DEL, non-ASCII).
bool bad_line_byte(char c) {
    const auto byte = static_cast<unsigned char>(c);
    return byte < 0x20 || byte >= 0x7f;
}

/// The router's answer to `req`. Every lane answers through here, so nothing an endpoint
/// throws leaves the I/O thread (where it would end the process): it becomes a 500.
HttpResponse answer(const Router& router, const HttpRequest& req) {
    HttpResponse res;
    try {
        router.dispatch(req, res);
        return res;
    } catch (...) {
    }
    try {
        // The path is not logged: it is caller-controlled text.
        log::error("admin API: unexpected failure handling a " + req.method + " request");
    } catch (...) {
    }
    return transport_error(500);
}

}  // namespace

std::string display(const config::ListenAddress& address) {
    const bool v6 = address.host.find(':') != std::string::npos;
    return (v6 ? "[" + address.host + "]" : address.host) + ":" + std::to_string(address.port);
}

enum class Admission { Api, ProbeOnly, Refused };

struct HttpTransport::Impl {
    Impl(TransportOptions o, const Router& r)
        : options(o), router(r),
          api(static_cast<std::size_t>(std::max(1, o.threads)), std::max<std::size_t>(1, o.max_queued)),
          probes(static_cast<std::size_t>(std::max(1, o.probe_threads))),
          ioc(std::make_unique<asio::io_context>()), acceptor(std::in_place, *ioc) {}

    class Session;

    /// Counts open connections per client; beyond the API caps, a connection may still take
    /// one of the few probe-only places.
    Admission admit(const std::string& client) {
        std::lock_guard lock(connections_mutex);
        if (take(connections, total_connections, options.max_connections, options.max_connections_per_client, client)) {
            return Admission::Api;
        }
        if (take(probe_connections, total_probe_connections, options.probe_connections,
                 options.probe_connections_per_client, client)) {
            return Admission::ProbeOnly;
        }
        return Admission::Refused;
    }
    void release(Admission admission, const std::string& client) {
        std::lock_guard lock(connections_mutex);
        const bool api = admission == Admission::Api;
        auto& counts = api ? connections : probe_connections;
        --(api ? total_connections : total_probe_connections);
        const auto it = counts.find(client);
        if (it != counts.end() && --it->second <= 0) counts.erase(it);
    }
    static bool take(std::map<std::string, int>& counts, int& total, int max_total, int max_per_client,
                     const std::string& client) {
        if (total >= max_total) return false;
        const auto it = counts.find(client);
        if (it != counts.end() && it->second >= max_per_client) return false;
        ++counts[client];
        ++total;
        return true;
    }

    /// Refused beyond every cap: the 503 is written without waiting (whatever the socket
    /// takes at once) and the socket closed, so a flood holds no descriptor and no memory.
    void refuse_at_once(tcp::socket& socket) {
        static const std::string kAnswer = [] {
            HttpResponse res;
            send_error(res, 503, "TOO_MANY_CONNECTIONS", "too many open connections; try again later");
            return "HTTP/1.1 503 Service Unavailable\r\nServer: outboxd\r\nContent-Type: application/json\r\n"
                   "Retry-After: 1\r\nConnection: close\r\nContent-Length: " +
                   std::to_string(res.body.size()) + "\r\n\r\n" + res.body;
        }();
        beast::error_code ignored;
        socket.non_blocking(true, ignored);
        socket.write_some(asio::buffer(kAnswer), ignored);
        socket.shutdown(tcp::socket::shutdown_both, ignored);
        socket.close(ignored);
        if (options.on_refused) options.on_refused();
    }

    void accept();

    TransportOptions options;
    const Router& router;
    std::mutex connections_mutex;
    std::map<std::string, int> connections;
    int total_connections = 0;
    std::map<std::string, int> probe_connections;
    int total_probe_connections = 0;
    BoundedTaskQueue api;
    asio::thread_pool probes;
    // After everything its pending handlers (sessions) refer to. stop() destroys both, which
    // destroys every session still waiting and so closes its socket.
    std::unique_ptr<asio::io_context> ioc;
    std::optional<tcp::acceptor> acceptor;
    std::optional<asio::steady_timer> accept_backoff;  // reset before ioc
    std::vector<std::thread> io_threads;
    std::atomic<bool> stopping{false};
    bool serving = false;
};

/// One connection: reads requests one after another (keep-alive), each within its limits
/// and deadline, and writes the answers. Runs on its strand; a handler's work runs on a
/// worker and posts the answer back.
class HttpTransport::Impl::Session : public std::enable_shared_from_this<Session> {
public:
    Session(Impl& impl, tcp::socket socket, std::string client, Admission admission)
        : impl_(impl), stream_(std::move(socket)), timer_(stream_.get_executor()), client_(std::move(client)),
          admission_(admission) {}
    ~Session() { impl_.release(admission_, client_); }
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    void start() {
        // A fresh connection has the whole request deadline to deliver its first request; a
        // probe-only one has a short time to send its head (a probe sends it at once).
        const auto deadline = admission_ == Admission::ProbeOnly
                                  ? std::min(impl_.options.request_timeout, impl_.options.probe_head_timeout)
                                  : impl_.options.request_timeout;
        arm(Clock::now() + deadline);
        read_head();
    }

private:
    /// The reading deadline. (Not the stream's own timeout: that closes the socket, and a
    /// request cut off mid-way still gets its 408.) On expiry the pending read is cancelled.
    void arm(Clock::time_point deadline) {
        const unsigned generation = ++generation_;
        timer_.expires_at(deadline);
        timer_.async_wait([self = shared_from_this(), generation](beast::error_code ec) {
            if (ec || generation != self->generation_) return;
            self->timed_out_ = true;
            beast::error_code ignored;
            self->stream_.socket().cancel(ignored);
        });
    }

    void disarm() {
        ++generation_;
        timer_.cancel();
    }

    void read_head() {
        if (check_head()) return;
        stream_.async_read_some(asio::buffer(chunk_), [self = shared_from_this()](beast::error_code ec, std::size_t n) {
            self->on_head_bytes(ec, n);
        });
    }

    void on_head_bytes(beast::error_code ec, std::size_t n) {
        if (ec) return on_read_error(ec);
        buffer_.append(chunk_.data(), n);
        read_head();
    }

    /// The request's deadline starts with its first byte; waiting for it is bounded by
    /// the keep-alive timeout (or, on a fresh connection, by the request deadline).
    void start_request() {
        in_request_ = true;
        if (!first_request_) arm(Clock::now() + impl_.options.request_timeout);
    }

    void on_read_error(beast::error_code) {
        if (timed_out_ && in_request_) {
            HttpResponse res;
            send_error(res, 408, "REQUEST_TIMEOUT", "the request was not received in time");
            write(res, false, false);
            return;
        }
        close();
    }

    /// Checks what has arrived of the head; refuses or dispatches when it can. Returns
    /// true when it took over (no further read is needed for the head).
    bool check_head() {
        const auto& o = impl_.options;
        if (!buffer_.empty() && !in_request_) start_request();
        // The request line, byte by byte as it arrives.
        const std::size_t line_end = buffer_.find("\r\n");
        const std::size_t line_bytes = line_end == std::string::npos ? buffer_.size() : line_end;
        for (std::size_t i = scanned_; i < line_bytes; ++i) {
            if (bad_line_byte(buffer_[i]) && !(buffer_[i] == '\r' && i + 1 == buffer_.size())) {
                refuse(400, "BAD_REQUEST", "the request line is malformed");
                return true;
            }
        }
        scanned_ = line_bytes;
        if (line_bytes > o.max_request_line) {
            refuse(414, "URI_TOO_LONG",
                   "the request line is longer than " + std::to_string(o.max_request_line) + " bytes");
            return true;
        }
        if (line_end == std::string::npos) return false;
        // The header block: fields counted and measured as they arrive.
        const std::size_t headers_begin = line_end + 2;
        const std::size_t end = buffer_.find("\r\n\r\n", line_end);
        const std::size_t header_bytes = (end == std::string::npos ? buffer_.size() : end + 2) - headers_begin;
        std::size_t fields = 0;
        for (std::size_t at = headers_begin; (at = buffer_.find("\r\n", at)) != std::string::npos &&
                                             (end == std::string::npos || at <= end);
             at += 2) {
            ++fields;
        }
        if (header_bytes > o.max_header_bytes || fields > o.max_headers) {
            refuse(431, "HEADERS_TOO_LARGE",
                   "the request has more than " + std::to_string(o.max_headers) + " header fields or " +
                       std::to_string(o.max_header_bytes) + " header bytes");
            return true;
        }
        if (end == std::string::npos) return false;
        return finish_head(end + 4);
    }

    bool finish_head(std::size_t head_bytes) {
        const auto& o = impl_.options;
        http::request_parser<http::empty_body> parser;
        parser.header_limit(static_cast<std::uint32_t>(head_bytes + 1));
        parser.eager(false);
        beast::error_code ec;
        parser.put(asio::buffer(buffer_.data(), head_bytes), ec);
        if ((ec && ec != http::error::need_more) || !parser.is_header_done()) {
            refuse(400, "BAD_REQUEST", "the request is malformed");
            return true;
        }
        const auto& head = parser.get();
        if (head.version() != 11 && head.version() != 10) {
            refuse(400, "BAD_REQUEST", "only HTTP/1.0 and HTTP/1.1 are served");
            return true;
        }
        if (head.find(http::field::transfer_encoding) != head.end()) {
            refuse(400, "TRANSFER_ENCODING_NOT_ACCEPTED",
                   "request bodies must be sent with Content-Length, not Transfer-Encoding");
            return true;
        }
        if (head.find(http::field::content_encoding) != head.end()) {
            refuse(415, "CONTENT_ENCODING_NOT_ACCEPTED", "encoded (compressed) request bodies are not accepted");
            return true;
        }
        const auto length = parser.content_length();
        const std::string method(std_view(head.method_string()));
        if (!length && has_body_method(method)) {
            refuse(411, "LENGTH_REQUIRED", "a " + method + " request needs a Content-Length header");
            return true;
        }
        if (length && *length > o.max_body_bytes) {
            refuse(413, "PAYLOAD_TOO_LARGE",
                   "the request body is larger than " + std::to_string(o.max_body_bytes) + " bytes");
            return true;
        }
        request_ = HttpRequest{};
        request_.method = method;
        split_target(std_view(head.target()), request_);
        for (const auto& field : head) {
            request_.headers.emplace_back(std_view(field.name_string()), std_view(field.value()));
        }
        keep_alive_ = head.keep_alive();
        head_bytes_ = head_bytes;
        body_bytes_ = length ? static_cast<std::size_t>(*length) : 0;
        read_body();
        return true;
    }

    void read_body() {
        if (buffer_.size() >= head_bytes_ + body_bytes_) {
            request_.body = buffer_.substr(head_bytes_, body_bytes_);
            buffer_.erase(0, head_bytes_ + body_bytes_);
            return dispatch();
        }
        stream_.async_read_some(asio::buffer(chunk_), [self = shared_from_this()](beast::error_code ec, std::size_t n) {
            if (ec) return self->on_read_error(ec);
            // Never more than the announced body: anything beyond waits for the next request.
            self->buffer_.append(self->chunk_.data(), n);
            self->read_body();
        });
    }

    void dispatch() {
        // The answer is written under its own deadline; reading the request is over.
        disarm();
        const Lane lane = impl_.router.lane(request_);
        const bool head_only = request_.method == "HEAD";
        if (admission_ == Admission::ProbeOnly) {
            keep_alive_ = false;
            const auto& paths = impl_.options.probe_paths;
            if (std::find(paths.begin(), paths.end(), request_.path) == paths.end()) {
                HttpResponse res;
                send_error(res, 503, "TOO_MANY_CONNECTIONS", "too many open connections; try again later");
                res.set_header("Retry-After", "1");
                return write(res, false, head_only);
            }
        }
        if (lane == Lane::Inline) return write(answer(impl_.router, request_), keep_alive_, head_only);
        auto job = [self = shared_from_this(), head_only] {
            HttpResponse res = answer(self->impl_.router, self->request_);
            asio::post(self->stream_.get_executor(), [self, res = std::move(res), head_only]() mutable {
                self->write(res, self->keep_alive_, head_only);
            });
        };
        if (lane == Lane::Probe) {
            asio::post(impl_.probes, std::move(job));
            return;
        }
        if (!impl_.api.try_enqueue(job)) {
            HttpResponse res;
            send_error(res, 503, "BUSY", "every admin request worker is busy; try again");
            res.set_header("Retry-After", "1");
            write(res, keep_alive_, head_only);
        }
    }

    /// Answers before the request was read completely: the connection is closed after it.
    void refuse(int status, const std::string& code, const std::string& message) {
        HttpResponse res;
        send_error(res, status, code, message);
        write(res, false, false);
    }

    void write(const HttpResponse& from, bool keep_alive, bool head_only) {
        disarm();
        if (impl_.stopping) keep_alive = false;
        auto res = std::make_shared<http::response<http::string_body>>();
        res->version(11);
        res->result(static_cast<unsigned>(from.status));
        res->set(http::field::server, "outboxd");
        res->set(http::field::content_type, from.content_type);
        for (const auto& [name, value] : from.headers) res->set(name, value);
        res->body() = from.body;
        res->prepare_payload();
        if (head_only) res->body().clear();
        res->keep_alive(keep_alive);
        stream_.expires_after(impl_.options.io_timeout);
        http::async_write(stream_, *res,
                          [self = shared_from_this(), res, keep_alive](beast::error_code ec, std::size_t) {
                              if (ec) return self->close();
                              if (!keep_alive) return self->linger();
                              self->next_request();
                          });
    }

    void next_request() {
        in_request_ = false;
        first_request_ = false;
        timed_out_ = false;
        scanned_ = 0;
        stream_.expires_never();
        if (buffer_.empty()) {
            arm(Clock::now() + impl_.options.keep_alive_timeout);
        } else {
            start_request();  // pipelined bytes: the next request has begun
        }
        read_head();
    }

    /// Half-closes, then discards what the client still sends for a moment, so it can
    /// read the answer before the connection goes away.
    void linger() {
        beast::error_code ignored;
        stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
        stream_.expires_after(kLinger);
        drain();
    }

    void drain() {
        stream_.async_read_some(asio::buffer(chunk_), [self = shared_from_this()](beast::error_code ec, std::size_t n) {
            self->drained_ += n;
            if (ec || self->drained_ > kLingerBytes) return self->close();
            self->drain();
        });
    }

    void close() {
        disarm();
        beast::error_code ignored;
        stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
        stream_.close();
    }

    Impl& impl_;
    beast::tcp_stream stream_;
    asio::steady_timer timer_;
    unsigned generation_ = 0;
    bool timed_out_ = false;
    std::string client_;
    Admission admission_;
    std::array<char, 4096> chunk_{};
    std::string buffer_;  // the head read so far (bounded by the limits), then pipelined bytes
    std::size_t scanned_ = 0;
    bool in_request_ = false;
    bool first_request_ = true;
    HttpRequest request_;
    bool keep_alive_ = false;
    std::size_t head_bytes_ = 0;
    std::size_t body_bytes_ = 0;
    std::size_t drained_ = 0;
};

void HttpTransport::Impl::accept() {
    acceptor->async_accept(asio::make_strand(*ioc), [this](beast::error_code ec, tcp::socket socket) {
        if (stopping) return;
        if (!ec) {
            beast::error_code peer_error;
            const auto peer = socket.remote_endpoint(peer_error);
            if (!peer_error) {
                std::string client = client_key(peer.address());
                const Admission admission = admit(client);
                if (admission == Admission::Refused) {
                    refuse_at_once(socket);
                } else {
                    std::make_shared<Session>(*this, std::move(socket), std::move(client), admission)->start();
                }
            }
        } else if (ec == asio::error::no_descriptors || ec == asio::error::no_buffer_space) {
            // Out of file descriptors: accept again a little later, without blocking this
            // I/O thread (it serves every other connection too).
            accept_backoff.emplace(*ioc, std::chrono::milliseconds{50});
            accept_backoff->async_wait([this](beast::error_code) {
                if (!stopping) accept();
            });
            return;
        }
        accept();
    });
}

HttpTransport::HttpTransport(TransportOptions options, const Router& router)
    : impl_(std::make_unique<Impl>(options, router)) {}

HttpTransport::~HttpTransport() { stop(); }

int HttpTransport::bind(const config::ListenAddress& address) {
    Impl& s = *impl_;
    const auto fail = [&](const std::string& why) {
        throw AdminStartError("cannot listen on " + display(address) + (why.empty() ? "" : ": " + why) +
                              " (admin.listen / OUTBOX_ADMIN_LISTEN; \"off\" disables the listener)");
    };
    beast::error_code ec;
    tcp::resolver resolver(*s.ioc);
    const auto endpoints = resolver.resolve(address.host, std::to_string(address.port),
                                            tcp::resolver::passive | tcp::resolver::numeric_service, ec);
    if (ec || endpoints.empty()) fail(ec ? ec.message() : "the host name has no address");
    const tcp::endpoint endpoint = endpoints.begin()->endpoint();
    s.acceptor->open(endpoint.protocol(), ec);
    if (ec) fail(ec.message());
    // SO_REUSEADDR only (never SO_REUSEPORT): a second host on the same port must fail.
    s.acceptor->set_option(asio::socket_base::reuse_address(true), ec);
    s.acceptor->bind(endpoint, ec);
    if (ec) fail(ec.message());
    s.acceptor->listen(asio::socket_base::max_listen_connections, ec);
    if (ec) fail(ec.message());
    return s.acceptor->local_endpoint().port();
}

void HttpTransport::serve() {
    Impl& s = *impl_;
    s.serving = true;
    s.accept();
    const int threads = std::max(1, s.options.io_threads);
    // A handler that throws ends only its own connection: the I/O thread logs it and goes
    // on serving (an escaped exception would terminate the process).
    for (int i = 0; i < threads; ++i) {
        s.io_threads.emplace_back([&s] {
            while (true) {
                try {
                    s.ioc->run();
                    return;
                } catch (...) {
                    log::error("admin API: an I/O handler failed; its connection is dropped");
                }
            }
        });
    }
}

void HttpTransport::stop() {
    Impl& s = *impl_;
    if (!s.serving) return;
    s.serving = false;
    s.stopping = true;
    asio::post(*s.ioc, [&s] {
        beast::error_code ignored;
        s.acceptor->close(ignored);
    });
    // Running requests finish; their answers are written while the I/O threads still run
    // (with Connection: close), but only for a moment.
    s.api.shutdown();
    s.probes.join();
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
    s.ioc->stop();
    for (auto& thread : s.io_threads) {
        if (thread.joinable()) thread.join();
    }
    s.io_threads.clear();
    s.acceptor.reset();
    s.accept_backoff.reset();
    s.ioc.reset();
}

}  // namespace outbox::admin
