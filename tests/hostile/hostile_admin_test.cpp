// The hostile-request tier: a real `outboxd run` child is attacked on its admin listener
// (oversized, encoded, endless and trickled requests, garbage) while a probe checks
// /healthz and events are published. Every attack must get its status and JSON error,
// /healthz must answer every probe within 1 s, events must keep completing, and the
// host's resident memory must grow by at most 32 MiB.
//
// Attackers, probes and trickling connections use different loopback source addresses
// (127.0.0.1, .2, .3), because connections are capped per client address.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "integration/admin_support.hpp"
#include "support/child_process.hpp"
#include "support/pg_fixture.hpp"
#include "support/plugin_dir.hpp"
#include "support/ports.hpp"
#include "support/temp_dir.hpp"
#include "support/test_host.hpp"

namespace outbox::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

constexpr const char* kSecret = "hostile-admin-secret-0123456789abcdefghij";
constexpr const char* kAttacker = "127.0.0.1";
constexpr const char* kProber = "127.0.0.2";
constexpr const char* kTrickler = "127.0.0.3";

/// A TCP connection from `source` to 127.0.0.1:port; -1 on failure.
int connect_from(const char* source, int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in local{};
    local.sin_family = AF_INET;
    ::inet_pton(AF_INET, source, &local.sin_addr);
    sockaddr_in remote{};
    remote.sin_family = AF_INET;
    remote.sin_port = htons(static_cast<uint16_t>(port));
    remote.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0 ||
        ::connect(fd, reinterpret_cast<sockaddr*>(&remote), sizeof remote) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

struct Answer {
    int status = 0;  // 0: no complete answer
    std::string body;
};

/// Reads one HTTP answer (status line, headers, Content-Length body unless `head_only`, as
/// for HEAD) within `timeout`.
Answer read_answer(int fd, std::chrono::milliseconds timeout, bool head_only = false) {
    const auto deadline = Clock::now() + timeout;
    std::string data;
    char buffer[4096];
    while (Clock::now() < deadline) {
        const auto head_end = data.find("\r\n\r\n");
        if (head_end != std::string::npos) {
            std::size_t length = 0;
            const auto at = data.find("Content-Length: ");
            if (at != std::string::npos && at < head_end && !head_only) length = std::stoul(data.substr(at + 16));
            if (data.size() >= head_end + 4 + length && data.rfind("HTTP/1.1 ", 0) == 0) {
                return {std::stoi(data.substr(9, 3)), data.substr(head_end + 4, length)};
            }
        }
        pollfd p{fd, POLLIN, 0};
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (::poll(&p, 1, static_cast<int>(std::max<long long>(left, 0))) <= 0) break;
        const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
        if (n <= 0) break;
        data.append(buffer, static_cast<std::size_t>(n));
    }
    return {};
}

/// Sends what `next` produces (an empty string ends it) until the server answers; returns
/// the answer and, in `sent`, how many bytes went out before it came.
Answer send_until_answer(int fd, const std::function<std::string()>& next, std::size_t& sent) {
    sent = 0;
    for (std::string chunk = next(); !chunk.empty(); chunk = next()) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 0) > 0) break;  // the answer (or the close) is there
        const ssize_t n = ::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL);
        if (n <= 0) break;
        sent += static_cast<std::size_t>(n);
    }
    return read_answer(fd, 5s);
}

std::string error_code(const Answer& answer) {
    const auto body = nlohmann::json::parse(answer.body, nullptr, false);
    if (body.is_discarded() || !body.contains("error")) return "<no JSON error body: " + answer.body + ">";
    return body["error"].value("code", "<no code>");
}

long rss_kib(pid_t pid) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(status, line)) {
        if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    }
    return -1;
}

class HostileAdmin : public ::testing::Test {
protected:
    void SetUp() override {
        create_scripted_effect_table(db_.url());
        const fs::path plugins = make_plugin_dir(dir_.path());
        fs::copy_file(OUTBOX_FIXTURE_SCRIPTED, plugins / "libscripted.so");
        port_ = free_port();
        std::map<std::string, std::string> env{{"OUTBOX_DATABASE_URL", db_.url()},
                                               {"OUTBOX_PLUGIN_DIR", plugins.string()},
                                               {"OUTBOX_POLL_INTERVAL", "100ms"},
                                               {"OUTBOX_ADMIN_LISTEN", "127.0.0.1:" + std::to_string(port_)},
                                               {"OUTBOX_ADMIN_JWT_SECRET", kSecret},
                                               {"OUTBOX_ADMIN_REQUEST_TIMEOUT", "3s"},
                                               {"OUTBOX_LOG_LEVEL", "warn"},
                                               {"OUTBOX_SHUTDOWN_TIMEOUT", "5s"}};
        if (!console_token_header().empty()) env["OUTBOX_ADMIN_CONSOLE_TOKEN_HEADER"] = console_token_header();
        host_ = std::make_unique<ChildProcess>(std::vector<std::string>{OUTBOXD_BINARY, "run"}, env,
                                               (dir_.path() / "host.log").string());
        ASSERT_TRUE(wait_until([&] { return probe().status == 200; }, 20s)) << read_file(log_path());
    }
    /// admin.console_token_header for this fixture's host (empty: unset).
    [[nodiscard]] virtual std::string console_token_header() const { return {}; }
    void TearDown() override {
        if (!host_) return;
        host_->signal(SIGTERM);
        EXPECT_EQ(host_->wait(20s), std::optional<int>(0)) << read_file(log_path());
    }

    [[nodiscard]] std::string log_path() const { return (dir_.path() / "host.log").string(); }

    /// GET /healthz from the prober's address, answered within 1 s.
    Answer probe() const {
        const int fd = connect_from(kProber, port_);
        if (fd < 0) return {};
        const std::string request = "GET /healthz HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";
        ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
        // Milliseconds when served; 2 s allows a loaded machine, while an attack that starves
        // the listener holds a probe for as long as it lasts (15 s).
        Answer answer = read_answer(fd, 2s);
        ::close(fd);
        return answer;
    }

    /// Runs one attack from the attacker's address and records its answer.
    void attack(const std::string& name, const std::string& head, const std::function<std::string()>& rest,
                int expected_status, std::size_t max_sent = SIZE_MAX) {
        const int fd = connect_from(kAttacker, port_);
        ASSERT_GE(fd, 0) << name;
        bool head_sent = false;
        std::size_t sent = 0;
        const Answer answer = send_until_answer(
            fd,
            [&]() -> std::string {
                if (!head_sent && !head.empty()) {
                    head_sent = true;
                    return head;
                }
                return rest();
            },
            sent);
        ::close(fd);
        EXPECT_EQ(answer.status, expected_status) << name;
        EXPECT_EQ(error_code(answer).find('<'), std::string::npos) << name << ": " << error_code(answer);
        EXPECT_LE(sent, max_sent) << name << ": the server read on long after the limit";
        ++attacks_;
    }

    TestDatabase db_;
    TempDir dir_;
    int port_ = 0;
    std::unique_ptr<ChildProcess> host_;
    std::atomic<int> attacks_{0};
};

TEST_F(HostileAdmin, AttacksAreRefusedWithTheirStatusWhileTheHostStaysLiveAndBounded) {
    const pid_t pid = host_->pid();
    // A gzip bomb: 20 MiB of zeros compressed (about 20 KiB), sent as an encoded body.
    const fs::path zeros = dir_.path() / "zeros";
    {
        std::ofstream out(zeros, std::ios::binary);
        const std::string block(1 << 20, '\0');
        for (int i = 0; i < 20; ++i) out << block;
    }
    const auto [gzip_code, gzip_output] = run_command({"/bin/gzip", "-9", "-k", zeros.string()}, {}, 60s);
    ASSERT_EQ(gzip_code, 0) << gzip_output;
    const std::string bomb = read_file(zeros.string() + ".gz");
    fs::remove(zeros);
    // Warm up the paths the attack takes, then take the baseline.
    for (int i = 0; i < 3; ++i) ASSERT_EQ(probe().status, 200);
    publish_many(db_.url(), "TestRequested", "{}", 20);
    ASSERT_TRUE(wait_until([&] { return db_.scalar("SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'") == "20"; }, 20s));
    const long baseline = rss_kib(pid);
    ASSERT_GT(baseline, 0);

    std::atomic<bool> attacking{true};
    std::atomic<long> peak{baseline};
    std::atomic<int> probes{0};
    std::mutex failures_mutex;
    std::vector<std::string> probe_failures;
    std::thread watcher([&] {
        while (attacking) {
            peak = std::max(peak.load(), rss_kib(pid));
            std::this_thread::sleep_for(20ms);
        }
    });
    std::thread prober([&] {
        while (attacking) {
            const auto started = Clock::now();
            const Answer answer = probe();
            const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started);
            ++probes;
            if (answer.status != 200) {
                std::lock_guard lock(failures_mutex);
                probe_failures.push_back("probe " + std::to_string(probes) + " after " + std::to_string(took.count()) +
                                         " ms: status " + std::to_string(answer.status));
            }
            std::this_thread::sleep_for(100ms);
        }
    });
    std::atomic<int> published{20};
    std::thread publisher([&] {
        while (attacking) {
            publish_many(db_.url(), "TestRequested", "{}", 5);
            published += 5;
            std::this_thread::sleep_for(250ms);
        }
    });

    // 200 slowloris connections: each sends a request head one byte every 500 ms. Up to
    // admin.max_connections_per_client (32) are held and cut at the request deadline (3 s,
    // 408) although they never stop sending; the rest are refused at once (503).
    std::vector<int> slow;
    std::map<int, int> slow_statuses;
    std::vector<std::string> slow_problems;
    std::thread slowloris([&] {
        for (int i = 0; i < 200; ++i) slow.push_back(connect_from(kTrickler, port_));
        const std::string head = "GET /api/v1/admin/outbox-events HTTP/1.1\r\nHost: h\r\nX-Slow: " + std::string(200, 'a');
        std::vector<bool> done(slow.size(), false);
        const auto started = Clock::now();
        for (std::size_t step = 0; Clock::now() - started < 15s; ++step) {
            std::size_t open = 0;
            for (std::size_t i = 0; i < slow.size(); ++i) {
                if (done[i]) continue;
                pollfd p{slow[i], POLLIN, 0};
                if (slow[i] < 0 || ::poll(&p, 1, 0) > 0) {
                    const Answer answer = slow[i] < 0 ? Answer{} : read_answer(slow[i], 1s);
                    ++slow_statuses[answer.status];
                    if (answer.status != 0 && error_code(answer).find('<') != std::string::npos) {
                        slow_problems.push_back(error_code(answer));
                    }
                    done[i] = true;
                    continue;
                }
                ++open;
                ::send(slow[i], &head[step % head.size()], 1, MSG_NOSIGNAL);
            }
            if (open == 0) break;
            std::this_thread::sleep_for(500ms);
        }
        for (const int fd : slow) ::close(fd);
    });

    const std::string retry_path = "/api/v1/admin/outbox-events/0b6f4d1e-8a53-4c1a-9a57-3c8f1a2b7e10/retry";

    for (int round = 0; round < 3; ++round) {
        // 20 MiB chunked body.
        std::size_t chunked = 0;
        attack("chunked body",
               "POST " + retry_path + " HTTP/1.1\r\nHost: h\r\nIdempotency-Key: k\r\nTransfer-Encoding: chunked\r\n\r\n",
               [&]() -> std::string {
                   if (chunked >= (20u << 20)) return "";
                   chunked += 65536;
                   return "10000\r\n" + std::string(65536, '{') + "\r\n";
               },
               400, 16u << 20);
        // The gzip bomb, with and without a Content-Length within the limit.
        bool bomb_sent = false;
        attack("gzip bomb",
               "POST " + retry_path + " HTTP/1.1\r\nHost: h\r\nContent-Encoding: gzip\r\nContent-Length: " +
                   std::to_string(bomb.size()) + "\r\n\r\n",
               [&]() -> std::string { return std::exchange(bomb_sent, true) ? "" : bomb; }, 415);
        bomb_sent = false;
        attack("gzip bomb without Content-Encoding",
               "POST " + retry_path + " HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nContent-Length: " +
                   std::to_string(bomb.size()) + "\r\n\r\n",
               [&]() -> std::string { return std::exchange(bomb_sent, true) ? "" : bomb; }, 413);
        // A 100 MiB request line, streamed: cut off long before its end.
        std::size_t line = 0;
        attack("100 MiB request line", "GET /",
               [&]() -> std::string {
                   if (line >= (100u << 20)) return "";
                   line += 65536;
                   return std::string(65536, 'a');
               },
               414, 16u << 20);
        // 10,000 header fields.
        int header = 0;
        attack("10000 headers", "GET /healthz HTTP/1.1\r\nHost: h\r\n",
               [&]() -> std::string {
                   if (header >= 10000) return header++ == 10000 ? "\r\n" : "";
                   return "X-H" + std::to_string(header++) + ": v\r\n";
               },
               431, 16u << 20);
        // Garbage bytes, and a TLS hello on the plain-text port.
        std::mt19937 random(static_cast<unsigned>(round));
        int garbage = 0;
        attack("garbage", "",
               [&]() -> std::string {
                   if (garbage++ >= 16) return "";
                   std::string bytes(4096, '\0');
                   for (char& c : bytes) c = static_cast<char>(random() & 0xff);
                   return bytes;
               },
               400, 16u << 20);
        bool hello = false;
        attack("tls hello", std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11),
               [&]() -> std::string { return std::exchange(hello, true) ? "" : std::string(500, '\x01'); }, 400);
        // A POST without Content-Length.
        attack("no Content-Length", "POST " + retry_path + " HTTP/1.1\r\nHost: h\r\nIdempotency-Key: k\r\n\r\n",
               [] { return std::string(); }, 411);
    }
    slowloris.join();
    const int completed_before_end =
        std::stoi(db_.scalar("SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'"));
    attacking = false;
    watcher.join();
    prober.join();
    publisher.join();

    std::cout << "hostile: " << attacks_ << " attacks, " << probes << " probes, RSS " << baseline << " KiB -> peak "
              << peak << " KiB, slowloris answers:";
    for (const auto& [status, count] : slow_statuses) std::cout << ' ' << status << "x" << count;
    std::cout << std::endl;

    EXPECT_TRUE(probe_failures.empty()) << ::testing::PrintToString(probe_failures);
    EXPECT_GE(probes, 10);
    EXPECT_LE(peak - baseline, 32 * 1024) << "KiB of resident memory grown during the attack";
    EXPECT_TRUE(slow_problems.empty()) << ::testing::PrintToString(slow_problems);
    EXPECT_EQ(slow_statuses[0], 0) << "every slow connection gets an answer";
    EXPECT_GE(slow_statuses[408], 1) << "held slow connections are cut at the request deadline";
    EXPECT_GE(slow_statuses[503], 1) << "connections beyond the per-client cap are refused";
    EXPECT_EQ(slow_statuses[408] + slow_statuses[503], 200);
    EXPECT_GT(completed_before_end, 20) << "events completed while the attack ran";
    EXPECT_TRUE(wait_until(
        [&] {
            return std::stoi(db_.scalar("SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'")) ==
                   published.load();
        },
        30s))
        << "every event published during the attack completes";
    EXPECT_EQ(probe().status, 200);
}


int open_descriptors(pid_t pid) {
    std::error_code ec;
    int count = 0;
    for (auto it = fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
         !ec && it != fs::directory_iterator(); it.increment(ec)) {
        ++count;
    }
    return count;
}

// M1: a flood of connections from 20 addresses (more than the global cap can hold at 32 per
// address) plus 200 slow ones never fails a probe from another address, and the refused
// connections are closed at once, so the host's descriptors stay bounded.
TEST_F(HostileAdmin, AConnectionFloodFromManyAddressesNeverStarvesTheProbesOrTheDescriptors) {
    rlimit limit{};
    ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &limit), 0);
    limit.rlim_cur = limit.rlim_max;
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &limit), 0);
    ASSERT_GE(limit.rlim_cur, 4000u) << "the test holds 3,200 connections itself";
    const pid_t pid = host_->pid();
    publish_many(db_.url(), "TestRequested", "{}", 10);
    ASSERT_TRUE(wait_until([&] { return db_.scalar("SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'") == "10"; }, 20s));
    const int baseline = open_descriptors(pid);
    // admin.max_connections (512) and the 64 probe places, over what the host held before.
    const int bound = baseline + 512 + 64 + 16;

    constexpr const char* kFloodProber = "127.0.0.22";
    constexpr const char* kFloodSlow = "127.0.0.23";
    std::atomic<bool> running{true};
    std::atomic<int> peak{baseline};
    std::thread watcher([&] {
        while (running) {
            peak = std::max(peak.load(), open_descriptors(pid));
            std::this_thread::sleep_for(20ms);
        }
    });
    std::atomic<int> published{10};
    std::thread publisher([&] {
        while (running) {
            publish_many(db_.url(), "TestRequested", "{}", 5);
            published += 5;
            std::this_thread::sleep_for(200ms);
        }
    });
    std::mutex failures_mutex;
    std::vector<std::string> probe_failures;
    std::atomic<int> probes{0};
    std::thread prober([&] {
        while (running) {
            const auto started = Clock::now();
            const int fd = connect_from(kFloodProber, port_);
            Answer answer;
            if (fd >= 0) {
                const std::string request = "GET /healthz HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";
                ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
                answer = read_answer(fd, 1s);
                ::close(fd);
            }
            ++probes;
            const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started);
            if (answer.status != 200 || took > 1s) {
                std::lock_guard lock(failures_mutex);
                probe_failures.push_back("status " + std::to_string(answer.status) + " after " + std::to_string(took.count()) + " ms");
            }
            std::this_thread::sleep_for(200ms);
        }
    });

    std::vector<int> held;
    int refused_connects = 0;
    for (int i = 0; i < 200; ++i) {
        const int fd = connect_from(kFloodSlow, port_);
        if (fd < 0) ++refused_connects; else held.push_back(fd);
    }
    for (int i = 0; i < 3000; ++i) {
        const std::string source = "127.0.0." + std::to_string(2 + i % 20);
        const int fd = connect_from(source.c_str(), port_);
        if (fd < 0) ++refused_connects; else held.push_back(fd);
    }
    // The slow ones trickle a head; the flood sends nothing and just holds on.
    const std::string head = "GET /api/v1/admin/outbox-events HTTP/1.1\r\nHost: h\r\n";
    for (int step = 0; step < 10; ++step) {
        for (std::size_t i = 0; i < 200 && i < held.size(); ++i) ::send(held[i], &head[step % head.size()], 1, MSG_NOSIGNAL);
        std::this_thread::sleep_for(500ms);
    }
    for (const int fd : held) ::close(fd);
    std::this_thread::sleep_for(1s);
    running = false;
    watcher.join();
    publisher.join();
    prober.join();

    std::cout << "flood: " << held.size() << " connections held, " << refused_connects << " connects failed, " << probes
              << " probes, host descriptors " << baseline << " -> peak " << peak << " (bound " << bound << ")" << std::endl;
    EXPECT_TRUE(probe_failures.empty()) << ::testing::PrintToString(probe_failures);
    EXPECT_GE(probes, 20);
    EXPECT_LE(peak.load(), bound) << "descriptors the host held during the flood";
    EXPECT_TRUE(wait_until([&] {
        return std::stoi(db_.scalar("SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'")) == published.load();
    }, 30s)) << "every event published during the flood completes";
    const Answer metrics = [&] {
        const int fd = connect_from(kProber, port_);
        const std::string request = "GET /metrics HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";
        ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
        Answer answer = read_answer(fd, 5s);
        ::close(fd);
        return answer;
    }();
    const auto at = metrics.body.find("\noutbox_admin_connections_refused_total ");
    ASSERT_NE(at, std::string::npos) << metrics.body.substr(0, 200);
    EXPECT_GT(std::stol(metrics.body.substr(at + 40)), 1000) << "refused connections are counted";
    EXPECT_EQ(probe().status, 200);
}

// Hostile bytes in every route (H1): non-UTF-8, NUL, CR, overlong UTF-8, bidi overrides,
// oversized and empty values in the path, the query and every header a route reads, signed
// in and not. Every request gets a complete answer (never a 5xx other than 503), every error
// answer is JSON, and the host keeps serving and completing events throughout.
struct Route {
    std::string method;
    std::string path;  // {param} is where a path value goes
};

const std::vector<Route>& every_route() {
    static const std::vector<Route> routes{
        {"GET", "/healthz"},
        {"GET", "/readyz"},
        {"GET", "/metrics"},
        {"GET", "/console"},
        {"GET", "/console/"},
        {"GET", "/console/session"},
        {"HEAD", "/console/session"},
        {"GET", "/console/{param}"},
        {"GET", "/api/v1/admin/me"},
        {"GET", "/api/v1/admin/fleet"},
        {"GET", "/api/v1/admin/overview"},
        {"GET", "/api/v1/admin/review-groups"},
        {"GET", "/api/v1/admin/outbox-events"},
        {"GET", "/api/v1/admin/outbox-events/{param}"},
        {"GET", "/api/v1/admin/outbox-events/{param}/history"},
        {"POST", "/api/v1/admin/outbox-events/{param}/retry"},
        {"POST", "/api/v1/admin/outbox-events/{param}/discard"},
        {"POST", "/api/v1/admin/outbox-events/{param}/cancel"},
        {"POST", "/api/v1/admin/outbox-events/retry"},
        {"POST", "/api/v1/admin/handlers/{param}/pause"},
        {"POST", "/api/v1/admin/handlers/{param}/resume"},
        {"GET", "/api/v1/admin/operations"},
        {"POST", "/api/v1/admin/operations"},
        {"GET", "/api/v1/admin/operations/{param}"},
        {"POST", "/api/v1/admin/operations/{param}/cancel"},
    };
    return routes;
}

struct Hostile {
    std::string name;
    std::string raw;      // as header bytes
    std::string encoded;  // percent-encoded, for the path and the query
};

const std::vector<Hostile>& hostile_values() {
    static const std::vector<Hostile> values{
        {"0xFF", "\xff", "%FF"},
        {"lone continuation", "a\x80z", "a%80z"},
        {"overlong slash", "\xc0\xaf", "%C0%AF"},
        {"NUL", std::string("a\0b", 3), "a%00b"},
        {"CR", "a\rb", "a%0Db"},
        {"LF", "a\nb", "a%0Ab"},
        {"bidi override", "\xe2\x80\xae", "%E2%80%AE"},
        {"empty", "", ""},
        {"oversized", std::string(6000, 'a'), std::string(3000, 'a')},
        {"JWT-looking with a bad byte", "eyJhbGciOiJIUzI1NiJ9.e\xff.c2ln", "eyJhbGciOiJIUzI1NiJ9.e%FF.c2ln"},
    };
    return values;
}

/// `path` with `value` as its parameter; a path without one gets `value` as an extra
/// segment when `append` (a hostile path), and stays as it is otherwise.
std::string replace_param(std::string path, const std::string& value, bool append) {
    const auto at = path.find("{param}");
    if (at == std::string::npos) return append && !value.empty() ? path + "/" + value : path;
    return path.replace(at, 7, value);
}

class HostileBytes : public HostileAdmin {
protected:
    /// Sends one raw request from the attacker's address and checks its answer.
    void send_raw(const std::string& what, const std::string& request) {
        const int fd = connect_from(kAttacker, port_);
        ASSERT_GE(fd, 0) << what;
        ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
        const Answer answer = read_answer(fd, 5s, request.rfind("HEAD ", 0) == 0);
        ::close(fd);
        ++sent_;
        ++statuses_[answer.status];
        if (answer.status == 0 || (answer.status >= 500 && answer.status != 503)) {
            problems_.push_back(what + ": status " + std::to_string(answer.status));
        } else if (answer.status >= 400 && !answer.body.empty() && error_code(answer).find('<') != std::string::npos) {
            problems_.push_back(what + ": " + error_code(answer));
        }
    }

    void sweep() {
        const std::string admin = "Bearer " + mint_hs256(token_claims("ADMIN", "acme"), kSecret);
        const std::string platform = "Bearer " + mint_hs256(token_claims("PLATFORM_ADMIN", "acme"), kSecret);
        const std::string console_header = console_token_header().empty() ? "X-Console-Token" : console_token_header();
        const std::string query_names[] = {"limit", "status", "event_type", "last_error_code", "cursor"};
        for (const Route& route : every_route()) {
            const bool post = route.method == "POST";
            for (const Hostile& value : hostile_values()) {
                const std::string what = route.method + " " + route.path + " with " + value.name;
                auto request = [&](const std::string& target, const std::vector<std::string>& headers,
                                   const std::string& body) {
                    std::string text = route.method + " " + target + " HTTP/1.1\r\nHost: h\r\nConnection: close\r\n";
                    for (const auto& header : headers) text += header + "\r\n";
                    if (post) text += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
                    return text + "\r\n" + (post ? body : std::string());
                };
                const std::string body = R"({"reason":"a reason that is long enough )" + value.raw +
                                         R"(","event_ids":[")" + value.raw + R"("],"event_type":")" + value.raw +
                                         R"(","version":1})";
                const std::string plain_path = replace_param(route.path, "0b6f4d1e-8a53-4c1a-9a57-3c8f1a2b7e10", false);
                for (const std::string& auth : {admin, platform}) {
                    const std::string authorization = "Authorization: " + auth;
                    send_raw(what + " in the path", request(replace_param(route.path, value.encoded, true),
                                                            {authorization, "Idempotency-Key: k1"}, body));
                    std::string query = "?";
                    for (const auto& name : query_names) query += name + "=" + value.encoded + "&";
                    send_raw(what + " in the query",
                             request(plain_path + query, {authorization, "Idempotency-Key: k2"}, body));
                    send_raw(what + " in Idempotency-Key",
                             request(plain_path, {authorization, "Idempotency-Key: " + value.raw}, body));
                    send_raw(what + " in the console header",
                             request(plain_path, {authorization, console_header + ": " + value.raw}, body));
                    send_raw(what + " in Content-Type",
                             request(plain_path, {authorization, "Idempotency-Key: k3", "X-Other: " + value.raw}, body));
                }
                send_raw(what + " in Authorization", request(plain_path, {"Authorization: Bearer " + value.raw}, body));
                send_raw(what + " as the whole Authorization", request(plain_path, {"Authorization: " + value.raw}, body));
            }
        }
    }

    void sweep_while_events_complete() {
        std::atomic<bool> running{true};
        std::atomic<int> published{0};
        std::thread publisher([&] {
            while (running) {
                publish_many(db_.url(), "TestRequested", "{}", 5);
                published += 5;
                std::this_thread::sleep_for(200ms);
            }
        });
        std::atomic<int> failed_probes{0};
        std::thread prober([&] {
            while (running) {
                if (probe().status != 200) ++failed_probes;
                std::this_thread::sleep_for(200ms);
            }
        });
        sweep();
        const int completed_during = std::stoi(db_.scalar("SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'"));
        running = false;
        publisher.join();
        prober.join();
        std::cout << "hostile bytes: " << sent_ << " requests, statuses:";
        for (const auto& [status, count] : statuses_) std::cout << ' ' << status << "x" << count;
        std::cout << std::endl;
        EXPECT_TRUE(problems_.empty()) << problems_.size() << " bad answers, e.g. " << problems_.front();
        EXPECT_EQ(failed_probes.load(), 0) << "/healthz answered 200 within 1 s throughout";
        EXPECT_GT(completed_during, 0) << "events completed while the requests ran";
        EXPECT_TRUE(wait_until([&] {
            return std::stoi(db_.scalar("SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'")) == published.load();
        }, 30s)) << "every event published during the requests completes";
        EXPECT_EQ(probe().status, 200);
        EXPECT_FALSE(host_->wait(0ms).has_value()) << read_file(log_path());
    }

    int sent_ = 0;
    std::map<int, int> statuses_;
    std::vector<std::string> problems_;
};

TEST_F(HostileBytes, EveryRouteAnswersHostileBytesWithoutTheConsoleHeader) { sweep_while_events_complete(); }

class HostileBytesWithConsoleHeader : public HostileBytes {
protected:
    [[nodiscard]] std::string console_token_header() const override { return "X-Console-Token"; }
};

TEST_F(HostileBytesWithConsoleHeader, EveryRouteAnswersHostileBytesWithTheConsoleHeaderSet) {
    sweep_while_events_complete();
    // A JWT in the header is passed on; a non-UTF-8 byte there is refused, not a crash.
    const std::string jwt = mint_hs256(token_claims("ADMIN", "acme"), kSecret);
    for (const auto& [value, expected] : std::vector<std::pair<std::string, int>>{
             {jwt, 200}, {"\xff", 400}, {jwt + "\xff", 400}, {"proxy token", 400}}) {
        const int fd = connect_from(kAttacker, port_);
        ASSERT_GE(fd, 0);
        const std::string request = "GET /console/session HTTP/1.1\r\nHost: h\r\nConnection: close\r\nX-Console-Token: " +
                                    value + "\r\n\r\n";
        ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
        const Answer answer = read_answer(fd, 5s);
        ::close(fd);
        EXPECT_EQ(answer.status, expected);
    }
    EXPECT_EQ(probe().status, 200);
}

}  // namespace
}  // namespace outbox::test
