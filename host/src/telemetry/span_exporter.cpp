#include "telemetry/span_exporter.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>

#include <atomic>
#include <stdexcept>

#include "log/log.hpp"
#include "telemetry/otlp.hpp"

namespace outbox::telemetry {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

}  // namespace

SpanExporter::SpanExporter(Options options, metrics::Metrics& metrics)
    : options_(std::move(options)), metrics_(metrics) {
    // http://host:port/path, as the configuration checked it; [v6] keeps its brackets out.
    const std::string_view url = options_.endpoint;
    constexpr std::string_view kScheme = "http://";
    if (url.substr(0, kScheme.size()) != kScheme) throw std::invalid_argument("the OTLP endpoint must be http://");
    const std::string_view rest = url.substr(kScheme.size());
    const auto slash = rest.find('/');
    const std::string_view authority = rest.substr(0, slash);
    const auto colon = authority.rfind(':');
    if (slash == std::string_view::npos || colon == std::string_view::npos) {
        throw std::invalid_argument("the OTLP endpoint must be http://host:port/path");
    }
    std::string_view host = authority.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    host_ = host;
    port_ = authority.substr(colon + 1);
    target_ = rest.substr(slash);
    queue_.reserve(options_.batch_size);
}

void SpanExporter::record(Span span) noexcept {
    bool full = false;
    bool batch_ready = false;
    {
        const std::lock_guard lock(mutex_);
        if (queue_.size() >= options_.queue_capacity) {
            full = true;
        } else {
            try {
                queue_.push_back(std::move(span));
            } catch (...) {
                full = true;
            }
            batch_ready = queue_.size() >= options_.batch_size;
        }
    }
    if (full) metrics_.telemetry_spans_dropped(1);
    if (batch_ready) ready_.notify_one();
}

void SpanExporter::run(std::stop_token stop) {
    auto last_warning = std::chrono::steady_clock::now() - std::chrono::minutes{1};
    const auto export_batch = [&](std::vector<Span>& batch, std::chrono::milliseconds timeout, std::stop_token token) {
        if (batch.empty()) return;
        if (post(batch, timeout, token)) {
            metrics_.telemetry_spans_exported(batch.size());
        } else {
            metrics_.telemetry_spans_dropped(batch.size());
            // One line a minute at most: a collector that is down must not flood the log.
            if (const auto now = std::chrono::steady_clock::now(); now - last_warning >= std::chrono::minutes{1}) {
                last_warning = now;
                log::warn("spans could not be exported; they are dropped and counted in "
                          "outbox_telemetry_spans_dropped_total",
                          {.code = "OTLP_EXPORT_FAILED"});
            }
        }
        batch.clear();
    };
    std::vector<Span> batch;
    while (!stop.stop_requested()) {
        {
            std::unique_lock lock(mutex_);
            ready_.wait_for(lock, stop, options_.interval, [&] { return queue_.size() >= options_.batch_size; });
            const std::size_t n = std::min(queue_.size(), options_.batch_size);
            batch.assign(std::make_move_iterator(queue_.begin()), std::make_move_iterator(queue_.begin() + n));
            queue_.erase(queue_.begin(), queue_.begin() + n);
        }
        export_batch(batch, options_.timeout, stop);
    }
    // Stopping: what is queued gets one more chance, bounded, unless stopping cuts it short.
    {
        const std::lock_guard lock(mutex_);
        batch.swap(queue_);
    }
    if (batch.size() > options_.batch_size) {
        metrics_.telemetry_spans_dropped(batch.size() - options_.batch_size);
        batch.resize(options_.batch_size);
    }
    export_batch(batch, std::min<std::chrono::milliseconds>(options_.timeout, std::chrono::seconds{1}), {});
}

bool SpanExporter::post(const std::vector<Span>& spans, std::chrono::milliseconds timeout, std::stop_token stop) const {
    asio::io_context io;
    tcp::resolver resolver(io);
    beast::tcp_stream stream(io);
    http::request<http::string_body> request{http::verb::post, target_, 11};
    request.set(http::field::host, host_ + ":" + port_);
    request.set(http::field::content_type, "application/x-protobuf");
    request.set(http::field::user_agent, "outboxd/" + options_.service_version);
    request.body() = encode_export_request(spans, options_.service_name, options_.service_version, options_.instance_id);
    request.prepare_payload();
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(64 * 1024);  // an answer is a small status message
    bool ok = false;

    stream.expires_after(timeout);
    resolver.async_resolve(host_, port_, [&](const beast::error_code& ec, const tcp::resolver::results_type& found) {
        if (ec) return;
        stream.async_connect(found, [&](const beast::error_code& ec, const tcp::endpoint&) {
            if (ec) return;
            http::async_write(stream, request, [&](const beast::error_code& ec, std::size_t) {
                if (ec) return;
                http::async_read(stream, buffer, parser, [&](const beast::error_code& ec, std::size_t) {
                    ok = !ec && parser.get().result_int() / 100 == 2;
                });
            });
        });
    });
    // The stream's expiry bounds connect, write and read; the run bounds the resolve too,
    // and a stop request ends the wait at once.
    const std::stop_callback on_stop(stop, [&io] { io.stop(); });
    io.run_for(timeout + std::chrono::milliseconds{100});
    if (!io.stopped()) {
        resolver.cancel();
        beast::error_code ignored;
        stream.socket().close(ignored);
        io.restart();
        io.run_for(std::chrono::milliseconds{100});
    }
    return ok;
}

}  // namespace outbox::telemetry
