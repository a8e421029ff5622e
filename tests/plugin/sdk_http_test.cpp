// outbox/sdk/http.hpp against real servers on 127.0.0.1: the status table, Retry-After,
// and one deadline for the whole call however the remote misbehaves (trickling bytes,
// never answering, refusing, dropping the connection), and ctx.cancelled().
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <ctime>
#include <functional>
#include <mutex>
#include <thread>

#include <outbox/sdk/http.hpp>

namespace outbox::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
namespace http = outbox::sdk::http;

class HttpFakeContext : public sdk::Context {
public:
    explicit HttpFakeContext(Clock::time_point deadline, std::optional<Clock::time_point> cancel_at = std::nullopt)
        : deadline_(deadline), cancel_at_(cancel_at) {}
    sdk::Db& db() override { throw std::logic_error("no database in these tests"); }
    [[nodiscard]] bool cancelled() const override { return cancel_at_ && Clock::now() >= *cancel_at_; }
    [[nodiscard]] Clock::time_point deadline() const override { return deadline_; }
    [[nodiscard]] const std::string& config_json() const override { return config_; }
    void log(sdk::LogLevel, std::string_view) override {}
    [[nodiscard]] const sdk::TraceContext& trace() const override { return trace_; }
    sdk::TraceContext trace_;

private:
    Clock::time_point deadline_;
    std::optional<Clock::time_point> cancel_at_;
    std::string config_ = "{}";
};

// A TCP server on 127.0.0.1 that accepts connections one after another and runs `behaviour`
// on each: the misbehaving remotes an HTTP library does not let you script.
class RawServer {
public:
    // `pause(d)` waits up to d and returns false once the server is stopping.
    using Behaviour = std::function<void(int fd, const std::function<bool(std::chrono::milliseconds)>& pause)>;

    explicit RawServer(Behaviour behaviour) : behaviour_(std::move(behaviour)) {
        listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t length = sizeof address;
        if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
            ::listen(listen_fd_, 8) != 0 ||
            ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
            throw std::runtime_error("cannot listen on 127.0.0.1");
        }
        port_ = ntohs(address.sin_port);
        thread_ = std::thread([this] { serve(); });
    }
    ~RawServer() {
        {
            const std::lock_guard lock(mutex_);
            stopping_ = true;
        }
        wake_.notify_all();
        ::shutdown(listen_fd_, SHUT_RDWR);  // wakes accept()
        thread_.join();
        ::close(listen_fd_);
    }
    RawServer(const RawServer&) = delete;
    RawServer& operator=(const RawServer&) = delete;

    [[nodiscard]] std::string origin() const { return "http://127.0.0.1:" + std::to_string(port_); }
    [[nodiscard]] int connections() const { return connections_; }

    /// Reads until the end of the request headers (the body, if any, is left unread).
    static void read_request_head(int fd) {
        std::string seen;
        char buffer[1024];
        while (seen.find("\r\n\r\n") == std::string::npos) {
            const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
            if (n <= 0) return;
            seen.append(buffer, static_cast<std::size_t>(n));
        }
    }
    static bool write(int fd, std::string_view text) {
        return ::send(fd, text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size());
    }

private:
    void serve() {
        while (true) {
            const int fd = ::accept(listen_fd_, nullptr, nullptr);
            if (fd < 0) return;
            ++connections_;
            behaviour_(fd, [this](std::chrono::milliseconds duration) {
                std::unique_lock lock(mutex_);
                return !wake_.wait_for(lock, duration, [this] { return stopping_; });
            });
            ::close(fd);
        }
    }

    Behaviour behaviour_;
    int listen_fd_ = -1;
    int port_ = 0;
    std::atomic<int> connections_{0};
    std::mutex mutex_;
    std::condition_variable wake_;
    bool stopping_ = false;
    std::thread thread_;
};

// Trickling lasts 10s, then the connection closes: a client without a whole-call deadline
// fails the timing assertions instead of hanging the test.
constexpr int kTrickledBytes = 50;

// Answers "HTTP/1.1 200 OK" and then a header one byte every 200ms: each read gets a byte
// well within any per-read timeout.
void trickle_headers(int fd, const std::function<bool(std::chrono::milliseconds)>& pause) {
    RawServer::read_request_head(fd);
    if (!RawServer::write(fd, "HTTP/1.1 200 OK\r\nX-Slow: ")) return;
    for (int i = 0; i < kTrickledBytes && pause(200ms) && RawServer::write(fd, "a"); ++i) {
    }
}

// Complete headers promising 100000 bytes, then the body one byte every 200ms.
void trickle_body(int fd, const std::function<bool(std::chrono::milliseconds)>& pause) {
    RawServer::read_request_head(fd);
    if (!RawServer::write(fd, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\n")) return;
    for (int i = 0; i < kTrickledBytes && pause(200ms) && RawServer::write(fd, "b"); ++i) {
    }
}

// Reads the request and never answers.
void never_answer(int fd, const std::function<bool(std::chrono::milliseconds)>& pause) {
    RawServer::read_request_head(fd);
    pause(1h);
}

// Starts an answer and closes the connection in the middle of its body.
void drop_mid_answer(int fd, const std::function<bool(std::chrono::milliseconds)>&) {
    RawServer::read_request_head(fd);
    RawServer::write(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"partial\":");
}

struct Outcome {
    bool retryable = false;
    std::string code;  // empty: the call returned a response
    std::optional<std::chrono::milliseconds> retry_after;
    std::chrono::milliseconds took{0};
    int status = 0;
    std::string body;
};

Outcome call(sdk::Context& ctx, const std::string& origin, std::chrono::milliseconds timeout,
             const std::string& path = "/work") {
    Outcome outcome;
    const auto started = Clock::now();
    try {
        http::Request request;
        request.path = path;
        request.headers = {{"Idempotency-Key", "evt-1"}};
        request.body = R"({"x":1})";
        const httplib::Response response = http::send(ctx, origin, request, timeout);
        outcome.status = response.status;
        outcome.body = response.body;
    } catch (const sdk::RetryableError& error) {
        outcome.retryable = true;
        outcome.code = error.code();
        outcome.retry_after = error.retry_after();
    } catch (const sdk::NonRetryableError& error) {
        outcome.code = error.code();
    }
    outcome.took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started);
    return outcome;
}

HttpFakeContext context_with(std::chrono::milliseconds until_deadline) { return HttpFakeContext(Clock::now() + until_deadline); }

// Generous: these prove the call is bounded, they are not performance assertions.
constexpr auto kSlack = 2s;

TEST(SdkHttpDeadline, AServerTricklingHeaderBytesCannotOutliveTheTimeout) {
    RawServer server(trickle_headers);
    HttpFakeContext ctx = context_with(60s);
    const Outcome outcome = call(ctx, server.origin(), 1s);
    EXPECT_TRUE(outcome.retryable);
    EXPECT_EQ(outcome.code, "TIMEOUT");
    EXPECT_GE(outcome.took, 900ms);
    EXPECT_LT(outcome.took, 1s + kSlack) << "the whole call, not each read, is bounded by the 1s timeout";
}

TEST(SdkHttpDeadline, AServerTricklingTheBodyCannotOutliveTheTimeout) {
    RawServer server(trickle_body);
    HttpFakeContext ctx = context_with(60s);
    const Outcome outcome = call(ctx, server.origin(), 1s);
    EXPECT_TRUE(outcome.retryable);
    EXPECT_EQ(outcome.code, "TIMEOUT");
    EXPECT_LT(outcome.took, 1s + kSlack);
}

TEST(SdkHttpDeadline, TheContextDeadlineCapsALongerTimeout) {
    RawServer server(trickle_headers);
    HttpFakeContext ctx = context_with(800ms);
    const Outcome outcome = call(ctx, server.origin(), 30s);
    EXPECT_EQ(outcome.code, "TIMEOUT");
    EXPECT_LT(outcome.took, 800ms + kSlack) << "ctx.deadline(), not the 30s timeout, ends the call";
}

TEST(SdkHttpDeadline, AServerThatNeverAnswersIsATimeout) {
    RawServer server(never_answer);
    HttpFakeContext ctx = context_with(60s);
    const Outcome outcome = call(ctx, server.origin(), 1s);
    EXPECT_TRUE(outcome.retryable);
    EXPECT_EQ(outcome.code, "TIMEOUT");
    EXPECT_GE(outcome.took, 900ms);
    EXPECT_LT(outcome.took, 1s + kSlack);
}

TEST(SdkHttpDeadline, NoTimeLeftIsATimeoutWithoutConnecting) {
    RawServer server(never_answer);
    HttpFakeContext ctx(Clock::now() - 1ms);
    const Outcome outcome = call(ctx, server.origin(), 5s);
    EXPECT_EQ(outcome.code, "TIMEOUT");
    EXPECT_EQ(server.connections(), 0);
}

TEST(SdkHttpCancel, CancellationDuringTheCallEndsItWithCancelled) {
    RawServer server(trickle_headers);
    HttpFakeContext ctx(Clock::now() + 60s, Clock::now() + 300ms);
    const Outcome outcome = call(ctx, server.origin(), 30s);
    EXPECT_TRUE(outcome.retryable);
    EXPECT_EQ(outcome.code, "CANCELLED");
    EXPECT_LT(outcome.took, 300ms + kSlack);
}

TEST(SdkHttpCancel, AnAlreadyCancelledContextMakesNoCall) {
    RawServer server(never_answer);
    HttpFakeContext ctx(Clock::now() + 60s, Clock::now() - 1ms);
    const Outcome outcome = call(ctx, server.origin(), 5s);
    EXPECT_EQ(outcome.code, "CANCELLED");
    EXPECT_EQ(server.connections(), 0);
}

TEST(SdkHttpTransport, ARefusedConnectionIsConnectFailed) {
    std::string origin;
    {
        RawServer gone(never_answer);
        origin = gone.origin();
    }
    HttpFakeContext ctx = context_with(60s);
    const Outcome outcome = call(ctx, origin, 5s);
    EXPECT_TRUE(outcome.retryable);
    EXPECT_EQ(outcome.code, "CONNECT_FAILED");
    EXPECT_LT(outcome.took, kSlack);
}

TEST(SdkHttpTransport, AConnectionDroppedMidAnswerIsConnectionLost) {
    RawServer server(drop_mid_answer);
    HttpFakeContext ctx = context_with(60s);
    const Outcome outcome = call(ctx, server.origin(), 5s);
    EXPECT_TRUE(outcome.retryable);
    EXPECT_EQ(outcome.code, "CONNECTION_LOST");
    EXPECT_LT(outcome.took, kSlack);
}

// An httplib server answering POST /status/<code> with that status, echoing the request's
// X-Retry-After as Retry-After.
class StatusServer {
public:
    StatusServer() {
        server_.Post(R"(/status/(\d+))", [this](const httplib::Request& request, httplib::Response& response) {
            response.status = std::stoi(request.matches[1]);
            if (request.has_header("X-Retry-After")) {
                response.set_header("Retry-After", request.get_header_value("X-Retry-After"));
            }
            response.set_content(R"({"ok":true})", "application/json");
            const std::lock_guard lock(mutex_);
            last_content_type_ = request.get_header_value("Content-Type");
            last_body_ = request.body;
            last_headers_ = request.headers;
        });
        server_.Get("/ready", [](const httplib::Request&, httplib::Response& response) { response.status = 204; });
        port_ = server_.bind_to_any_port("127.0.0.1");
        thread_ = std::thread([this] { server_.listen_after_bind(); });
        // The socket already listens; an answer proves the loop runs, so stop() will reach it.
        httplib::Client(origin()).Get("/ready");
    }
    ~StatusServer() {
        server_.stop();
        thread_.join();
    }
    StatusServer(const StatusServer&) = delete;
    StatusServer& operator=(const StatusServer&) = delete;

    [[nodiscard]] std::string origin() const { return "http://127.0.0.1:" + std::to_string(port_); }
    [[nodiscard]] std::string last_content_type() const {
        const std::lock_guard lock(mutex_);
        return last_content_type_;
    }
    [[nodiscard]] std::string last_body() const {
        const std::lock_guard lock(mutex_);
        return last_body_;
    }
    /// Every value of header `name` in the last request, in order.
    [[nodiscard]] std::vector<std::string> last_header(const std::string& name) const {
        const std::lock_guard lock(mutex_);
        std::vector<std::string> values;
        const auto [first, last] = last_headers_.equal_range(name);
        for (auto it = first; it != last; ++it) values.push_back(it->second);
        return values;
    }

private:
    httplib::Server server_;
    int port_ = 0;
    std::thread thread_;
    mutable std::mutex mutex_;
    std::string last_content_type_;
    std::string last_body_;
    httplib::Headers last_headers_;
};

Outcome call_status(StatusServer& server, int status, std::optional<std::string> retry_after = std::nullopt) {
    HttpFakeContext ctx = context_with(60s);
    Outcome outcome;
    try {
        httplib::Headers headers;
        if (retry_after) headers.emplace("X-Retry-After", *retry_after);
        const httplib::Response response = http::post_json(
            ctx, http::Endpoint{server.origin(), "/status/" + std::to_string(status)}, headers, R"({"x":1})", 5s);
        outcome.status = response.status;
        outcome.body = response.body;
    } catch (const sdk::RetryableError& error) {
        outcome.retryable = true;
        outcome.code = error.code();
        outcome.retry_after = error.retry_after();
    } catch (const sdk::NonRetryableError& error) {
        outcome.code = error.code();
    }
    return outcome;
}

TEST(SdkHttpStatus, A2xxAnswerIsReturnedWithItsBody) {
    StatusServer server;
    for (const int status : {200, 201, 202, 204}) {
        const Outcome outcome = call_status(server, status);
        EXPECT_EQ(outcome.code, "") << status;
        EXPECT_EQ(outcome.status, status);
    }
    EXPECT_EQ(call_status(server, 200).body, R"({"ok":true})");
    EXPECT_EQ(server.last_content_type(), "application/json");
    EXPECT_EQ(server.last_body(), R"({"x":1})");
}

TEST(SdkHttpTrace, TheCallsTraceContextIsSentUnlessTheRequestSetsItsOwn) {
    StatusServer server;
    const http::Endpoint endpoint{server.origin(), "/status/200"};
    HttpFakeContext ctx = context_with(60s);
    http::post_json(ctx, endpoint, {}, "{}", 5s);
    EXPECT_TRUE(server.last_header("traceparent").empty()) << "no trace context: no header";
    EXPECT_TRUE(server.last_header("tracestate").empty());

    const std::string parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    ctx.trace_.traceparent = parent;
    http::post_json(ctx, endpoint, {}, "{}", 5s);
    EXPECT_EQ(server.last_header("traceparent"), std::vector<std::string>{parent});
    EXPECT_TRUE(server.last_header("tracestate").empty()) << "an empty tracestate is not sent";

    ctx.trace_.tracestate = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7";
    http::post_json(ctx, endpoint, {}, "{}", 5s);
    EXPECT_EQ(server.last_header("traceparent"), std::vector<std::string>{parent});
    EXPECT_EQ(server.last_header("tracestate"), std::vector<std::string>{ctx.trace_.tracestate});

    // A handler that starts a span of its own sends its own context; it is not doubled.
    const std::string own = "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01";
    http::post_json(ctx, endpoint, {{"traceparent", own}}, "{}", 5s);
    EXPECT_EQ(server.last_header("traceparent"), std::vector<std::string>{own});
    EXPECT_TRUE(server.last_header("tracestate").empty()) << "the event's tracestate belongs to the event's parent";
}

TEST(SdkHttpStatus, EachStatusMapsToTheDocumentedErrorKindAndCode) {
    StatusServer server;
    struct Row {
        int status;
        bool retryable;
    };
    for (const Row row : {Row{408, true}, Row{409, true}, Row{429, true}, Row{500, true}, Row{502, true},
                          Row{503, true}, Row{504, true}, Row{599, true}, Row{301, false}, Row{304, false},
                          Row{400, false}, Row{401, false}, Row{403, false}, Row{404, false}, Row{410, false},
                          Row{422, false}}) {
        const Outcome outcome = call_status(server, row.status);
        EXPECT_EQ(outcome.code, "HTTP_" + std::to_string(row.status));
        EXPECT_EQ(outcome.retryable, row.retryable) << "HTTP " << row.status;
    }
}

std::string http_date(std::chrono::system_clock::time_point when) {
    const std::time_t t = std::chrono::system_clock::to_time_t(when);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char text[64];
    std::strftime(text, sizeof text, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    return text;
}

TEST(SdkHttpStatus, RetryAfterOnARetryableAnswerTravelsWithTheError) {
    StatusServer server;
    EXPECT_EQ(call_status(server, 503, "7").retry_after, std::optional<std::chrono::milliseconds>(7s));
    const auto dated = call_status(server, 429, http_date(std::chrono::system_clock::now() + 40s)).retry_after;
    ASSERT_TRUE(dated.has_value());
    // The date has whole seconds (up to 1 s lost) and the call takes its own time on a
    // loaded machine; a date misread as a number or ignored gives nothing near 35 s.
    EXPECT_GE(*dated, 35s);
    EXPECT_LE(*dated, 40s);
    EXPECT_EQ(call_status(server, 500, "soon").retry_after, std::nullopt) << "unparsable: the host's backoff applies";
    const Outcome refused = call_status(server, 404, "7");
    EXPECT_FALSE(refused.retryable);
    EXPECT_EQ(refused.code, "HTTP_404");
}

TEST(SdkHttpRetryAfter, ParsesSecondsAndHttpDatesAndRefusesTheRest) {
    using std::chrono::milliseconds;
    const auto now = std::chrono::system_clock::time_point{std::chrono::sys_days{std::chrono::year{2026} / 1 / 2}};
    EXPECT_EQ(http::parse_retry_after("0", now), milliseconds{0});
    EXPECT_EQ(http::parse_retry_after("120", now), milliseconds{120'000});
    EXPECT_EQ(http::parse_retry_after(" 5\t", now), milliseconds{5'000}) << "surrounding whitespace";
    EXPECT_EQ(http::parse_retry_after("99999999999999999999", now), http::kMaxRetryAfter) << "saturates";
    EXPECT_EQ(http::parse_retry_after("7200", now), http::kMaxRetryAfter) << "capped at one hour";
    EXPECT_EQ(http::parse_retry_after("Fri, 02 Jan 2026 00:00:30 GMT", now), milliseconds{30'000});
    EXPECT_EQ(http::parse_retry_after("Thu, 01 Jan 2026 23:59:00 GMT", now), milliseconds{0}) << "a past date";
    for (const char* bad : {"", " ", "-5", "1.5", "5s", "soon", "Fri, 02 Jan 2026 00:00:30 CET",
                            "Fri, 31 Feb 2026 00:00:30 GMT", "Fri, 02 Foo 2026 00:00:30 GMT",
                            "Fri, 02 Jan 2026 25:00:30 GMT"}) {
        EXPECT_EQ(http::parse_retry_after(bad, now), std::nullopt) << "'" << bad << "'";
    }
}

TEST(SdkHttpBody, A2xxBodyThatIsNotJsonIsABadResponse) {
    httplib::Response response;
    response.status = 200;
    response.body = "<html>oops</html>";
    try {
        (void)http::json_body(response);
        FAIL() << "no error for a body that is not JSON";
    } catch (const sdk::RetryableError& error) {
        EXPECT_EQ(error.code(), "BAD_RESPONSE");
    }
    response.body = R"({"category":"news"})";
    EXPECT_EQ(http::json_body(response)["category"], "news");
}

TEST(SdkHttpConfig, EndpointsAndDurationsAreCheckedWithTheKeyInTheMessage) {
    const http::Endpoint endpoint = http::parse_endpoint("https://api.example:8443/v1/classify?x=1", "config.endpoint");
    EXPECT_EQ(endpoint.origin, "https://api.example:8443");
    EXPECT_EQ(endpoint.path, "/v1/classify?x=1");
    EXPECT_EQ(http::parse_endpoint("http://127.0.0.1:8082", "k").path, "/");
    for (const char* bad : {"127.0.0.1:8082", "ftp://x/", "http://user:pw@x/", "http://:80/", "http://x:0/",
                            "http://x:99999/", "http://x/#frag"}) {
        EXPECT_THROW(http::parse_endpoint(bad, "config.endpoint"), http::InvalidConfig) << bad;
    }
    EXPECT_EQ(http::parse_duration("250ms", "k"), 250ms);
    EXPECT_EQ(http::parse_duration("10s", "k"), 10s);
    EXPECT_EQ(http::parse_duration("2m", "k"), 2min);
    EXPECT_EQ(http::parse_duration(1.5, "k"), 1500ms);
    for (const nlohmann::json& bad : {nlohmann::json("0s"), nlohmann::json("-1s"), nlohmann::json("2h"),
                                     nlohmann::json("61m"), nlohmann::json("soon"), nlohmann::json(0),
                                     nlohmann::json(true)}) {
        try {
            (void)http::parse_duration(bad, "config.timeout");
            ADD_FAILURE() << bad.dump();
        } catch (const http::InvalidConfig& error) {
            EXPECT_EQ(std::string(error.what()).rfind("config.timeout: ", 0), 0u) << error.what();
        }
    }
}

}  // namespace
}  // namespace outbox::test
