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

#include "support/child_process.hpp"
#include "support/pg_fixture.hpp"
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

int free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
    socklen_t length = sizeof address;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
    ::close(fd);
    return ntohs(address.sin_port);
}

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

/// Reads one HTTP answer (status line, headers, Content-Length body) within `timeout`.
Answer read_answer(int fd, std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    std::string data;
    char buffer[4096];
    while (Clock::now() < deadline) {
        const auto head_end = data.find("\r\n\r\n");
        if (head_end != std::string::npos) {
            std::size_t length = 0;
            const auto at = data.find("Content-Length: ");
            if (at != std::string::npos && at < head_end) length = std::stoul(data.substr(at + 16));
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
        const fs::path plugins = dir_.path() / "plugins";
        fs::create_directory(plugins);
        fs::copy_file(OUTBOX_FIXTURE_SCRIPTED, plugins / "libscripted.so");
        port_ = free_port();
        host_ = std::make_unique<ChildProcess>(
            std::vector<std::string>{OUTBOXD_BINARY, "run"},
            std::map<std::string, std::string>{{"OUTBOX_DATABASE_URL", db_.url()},
                                               {"OUTBOX_PLUGIN_DIR", plugins.string()},
                                               {"OUTBOX_POLL_INTERVAL", "100ms"},
                                               {"OUTBOX_ADMIN_LISTEN", "127.0.0.1:" + std::to_string(port_)},
                                               {"OUTBOX_ADMIN_JWT_SECRET", kSecret},
                                               {"OUTBOX_ADMIN_REQUEST_TIMEOUT", "3s"},
                                               {"OUTBOX_LOG_LEVEL", "warn"},
                                               {"OUTBOX_SHUTDOWN_TIMEOUT", "5s"}},
            (dir_.path() / "host.log").string());
        ASSERT_TRUE(wait_until([&] { return probe().status == 200; }, 20s)) << read_file(log_path());
    }
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

}  // namespace
}  // namespace outbox::test
