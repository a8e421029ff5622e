// outboxd under systemd (Type=notify): a real `outboxd run` child reports to a NOTIFY_SOCKET
// this test binds. READY=1 comes with the first STATUS= line once the admin listener
// answers; WATCHDOG=1 follows the scheduler's loop (it stops while that loop hangs in a
// claim on a silent database path, and resumes when the path answers again); a SIGHUP
// rescan is framed by RELOADING=1 and READY=1; SIGTERM sends STOPPING=1 and no beat after.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <thread>

#include <httplib.h>

#include "fault/fault_fixture.hpp"
#include "support/pg_fixture.hpp"
#include "support/temp_dir.hpp"
#include "support/test_host.hpp"

namespace outbox::test::fault {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

/// A bound unix datagram socket collecting every notification line, in arrival order.
class NotifySocket {
public:
    explicit NotifySocket(const fs::path& path) : path_(path), fd_(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) {
        if (fd_ < 0) throw std::runtime_error("socket(AF_UNIX) failed");
        sockaddr_un address{};
        address.sun_family = AF_UNIX;
        if (path.string().size() >= sizeof(address.sun_path)) throw std::runtime_error("socket path too long");
        std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
        if (::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
            throw std::runtime_error("bind(NOTIFY_SOCKET) failed");
        }
        timeval tick{0, 100'000};
        ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tick, sizeof(tick));
        reader_ = std::jthread([this](std::stop_token stop) {
            char buffer[4096];
            while (!stop.stop_requested()) {
                const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
                if (n <= 0) continue;
                std::lock_guard lock(mutex_);
                std::string message(buffer, static_cast<std::size_t>(n));
                std::size_t start = 0;
                while (start < message.size()) {
                    const auto end = message.find('\n', start);
                    lines_.push_back(message.substr(start, end == std::string::npos ? std::string::npos : end - start));
                    if (end == std::string::npos) break;
                    start = end + 1;
                }
            }
        });
    }
    ~NotifySocket() {
        reader_.request_stop();
        reader_.join();
        ::close(fd_);
        fs::remove(path_);
    }
    NotifySocket(const NotifySocket&) = delete;
    NotifySocket& operator=(const NotifySocket&) = delete;

    [[nodiscard]] std::vector<std::string> lines() const {
        std::lock_guard lock(mutex_);
        return lines_;
    }
    [[nodiscard]] int count(const std::string& prefix) const {
        const auto all = lines();
        return static_cast<int>(std::count_if(all.begin(), all.end(), [&](const auto& l) { return l.starts_with(prefix); }));
    }
    /// Index of the first line starting with `prefix` at or after `from`; -1 when none.
    [[nodiscard]] long find(const std::string& prefix, long from = 0) const {
        const auto all = lines();
        for (auto i = static_cast<std::size_t>(from); i < all.size(); ++i) {
            if (all[i].starts_with(prefix)) return static_cast<long>(i);
        }
        return -1;
    }
    [[nodiscard]] std::string dump() const {
        std::string out;
        for (const auto& line : lines()) out += line + "\n";
        return out;
    }

private:
    fs::path path_;
    int fd_;
    mutable std::mutex mutex_;
    std::vector<std::string> lines_;
    std::jthread reader_;
};

TEST(SystemdNotify, ReadyStatusWatchdogReloadingStoppingInOrderAndTheWatchdogFollowsTheDispatchLoop) {
    TestDatabase db;
    create_scripted_effect_table(db.url());
    const Fleet fleet(db.url(), {});  // for its plugin directory (the scripted fixture) and logs
    const SilentableProxy proxy(port_of(db.url()), fleet.dir() / "socat.log");
    // Short: sun_path holds 108 bytes.
    TempDir socket_dir;
    NotifySocket notify(socket_dir.path() / "notify");
    int admin_port = free_port();
    while (admin_port == proxy.port()) admin_port = free_port();

    auto host = fleet.start("notified", {{"OUTBOX_DATABASE_URL", via_port(db.url(), proxy.port())},
                                         {"OUTBOX_ADMIN_LISTEN", "127.0.0.1:" + std::to_string(admin_port)},
                                         // Longer than the watchdog: the loop's idle wait must follow
                                         // the watchdog, not the poll interval.
                                         {"OUTBOX_POLL_INTERVAL", "5s"},
                                         // A claim on the silent path hangs this long.
                                         {"OUTBOX_DATABASE_CALL_TIMEOUT", "20s"},
                                         {"OUTBOX_SHUTDOWN_TIMEOUT", "5s"},
                                         {"NOTIFY_SOCKET", (socket_dir.path() / "notify").string()},
                                         {"WATCHDOG_USEC", "1000000"}});
    const auto log = [&] { return fleet.log("notified") + "\nnotifications:\n" + notify.dump(); };

    ASSERT_TRUE(wait_until([&] { return notify.find("READY=1") >= 0; }, 30s)) << log();
    {
        // READY=1 only once the admin listener serves.
        httplib::Client admin("127.0.0.1", admin_port);
        admin.set_connection_timeout(2, 0);
        const auto health = admin.Get("/healthz");
        ASSERT_TRUE(health) << log();
        EXPECT_EQ(health->status, 200);
    }
    const long ready = notify.find("READY=1");
    ASSERT_EQ(notify.find("STATUS="), ready + 1) << "READY=1 carries the first STATUS= line\n" << log();
    const std::string status = notify.lines()[static_cast<std::size_t>(ready + 1)];
    EXPECT_NE(status.find("1 handler(s): scripted"), std::string::npos) << status;
    EXPECT_NE(status.find("backlog"), std::string::npos) << status;
    EXPECT_NE(status.find("PENDING="), std::string::npos) << status;
    EXPECT_EQ(notify.find("WATCHDOG=1"), notify.find("WATCHDOG=1", ready)) << "no beat before READY=1\n" << log();

    // WATCHDOG_USEC=1s: the loop beats at least every half second although it polls every 5 s.
    const int beats_before = notify.count("WATCHDOG=1");
    std::this_thread::sleep_for(2s);
    // A beat every 250 ms is 8 in 2 s; 3 allows beats delayed on a loaded machine, and a
    // loop that only beats when it polls (5 s) sends at most one.
    EXPECT_GE(notify.count("WATCHDOG=1") - beats_before, 3) << log();

    // SIGHUP: RELOADING=1, the rescan, READY=1.
    host->signal(SIGHUP);
    ASSERT_TRUE(wait_until([&] {
        const long reloading = notify.find("RELOADING=1");
        return reloading >= 0 && notify.find("READY=1", reloading) > reloading;
    }, 10s)) << log();

    // The path to PostgreSQL goes silent: the loop's next claim hangs (up to the 20 s
    // call_timeout), so the beats stop although every other thread of the host runs on.
    proxy.freeze();
    // The loop enters its next claim within 250 ms: it is in it once no beat came for 1 s.
    int last_count = -1;
    auto last_change = std::chrono::steady_clock::now();
    ASSERT_TRUE(wait_until([&] {
        const int now_count = notify.count("WATCHDOG=1");
        if (now_count != last_count) {
            last_count = now_count;
            last_change = std::chrono::steady_clock::now();
        }
        return std::chrono::steady_clock::now() - last_change >= 1s;
    }, 10s)) << "the watchdog kept beating after the path to PostgreSQL went silent\n" << log();
    const int beats_at_freeze = notify.count("WATCHDOG=1");
    std::this_thread::sleep_for(4s);
    EXPECT_EQ(notify.count("WATCHDOG=1"), beats_at_freeze) << "the watchdog beat while the dispatch loop hung\n" << log();
    ASSERT_FALSE(host->wait(0ms)) << log();

    // The claim is answered: the loop goes round and beats again.
    proxy.thaw();
    EXPECT_TRUE(wait_until([&] { return notify.count("WATCHDOG=1") > beats_at_freeze + 2; }, 15s)) << log();
    EXPECT_TRUE(wait_until([&] { return notify.count("STATUS=") >= 2; }, 15s)) << "STATUS= is refreshed every 10 s\n" << log();

    host->signal(SIGTERM);
    EXPECT_EQ(host->wait(30s), std::optional<int>(0)) << log();
    const long stopping = notify.find("STOPPING=1");
    ASSERT_GT(stopping, ready) << log();
    EXPECT_EQ(notify.find("WATCHDOG=1", stopping), -1) << "no beat after STOPPING=1\n" << log();
}

TEST(SystemdNotify, WithoutNotifySocketNothingIsSentAndAHostThatClaimsNothingStillBeats) {
    TestDatabase db;
    const Fleet fleet(db.url(), {});
    TempDir socket_dir;
    NotifySocket notify(socket_dir.path() / "notify");
    // No NOTIFY_SOCKET: the host runs as before and nothing arrives.
    {
        auto host = fleet.start("plain", {{"OUTBOX_ADMIN_LISTEN", "off"}, {"WATCHDOG_USEC", "1000000"}});
        ASSERT_TRUE(wait_until([&] { return count_lines(fleet.log("plain"), "started as") == 1; }, 20s)) << fleet.log("plain");
        std::this_thread::sleep_for(1s);
        stop_cleanly(fleet, *host, "plain");
        EXPECT_TRUE(notify.lines().empty()) << notify.dump();
    }
    // outbox.enabled=false: no scheduler loop; the status thread keeps the watchdog fed.
    auto host = fleet.start("disabled", {{"OUTBOX_ADMIN_LISTEN", "off"},
                                         {"OUTBOX_ENABLED", "false"},
                                         {"NOTIFY_SOCKET", (socket_dir.path() / "notify").string()},
                                         {"WATCHDOG_USEC", "1000000"}});
    ASSERT_TRUE(wait_until([&] { return notify.find("READY=1") >= 0; }, 20s)) << fleet.log("disabled");
    const int beats = notify.count("WATCHDOG=1");
    std::this_thread::sleep_for(2s);
    // 8 beats in 2 s when on time; 3 allows delays on a loaded machine, none means unfed.
    EXPECT_GE(notify.count("WATCHDOG=1") - beats, 3) << notify.dump();
    stop_cleanly(fleet, *host, "disabled");
}

}  // namespace
}  // namespace outbox::test::fault
