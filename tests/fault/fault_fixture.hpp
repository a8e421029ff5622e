#pragma once
// Shared pieces of the fault-injection tier: a fleet of real outboxd processes, a
// PostgreSQL cluster of the test's own (so restarting it disturbs no other test), and the
// invariants every fault case must leave behind.

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "support/child_process.hpp"
#include "support/temp_dir.hpp"

namespace outbox::test::fault {

/// The first column of the first row of `sql`, as a number.
long long count(const std::string& url, const std::string& sql);

/// Events still PENDING, RETRY_WAIT or PROCESSING.
long long unsettled(const std::string& url);

/// The last non-empty line of `text` (what pg.sh prints last: a port, a URL).
std::string last_line(const std::string& text);

/// Runs a shell snippet (the cluster scripts need bash, and pg_ctl the cluster owner);
/// throws with the output when it fails.
std::string shell(const std::string& script, std::chrono::seconds timeout = std::chrono::seconds{120});

/// PROCESSING rows whose lease expired more than `slack` ago: a recovery that did not happen.
long long stuck_processing(const std::string& url, std::chrono::seconds slack);

/// "status=n, ..." for failure messages.
std::string status_summary(const std::string& url);

/// Asserts (gtest) the invariants every fault case must leave behind: every event settled
/// (COMPLETED, or REVIEW_REQUIRED with a code from `review_codes`); every COMPLETED event
/// consumed exactly once by `handler` (its only handler); no event left in PROCESSING.
/// With `scripted_effects` (the scripted fixture's ctx.db() rows it must have left), also:
/// every scripted_effect row backed by a consumption row, at most one per event (no
/// handler DB effect committed twice).
void expect_final_invariants(const std::string& url, const std::set<std::string>& review_codes,
                             std::optional<long long> scripted_effects, const std::string& handler = "scripted");

/// Publishes `count` TestRequested events whose payload is built per row by the SQL
/// expression `payload_sql` (it may use random() and the series value `g`).
void publish_generated(const std::string& url, int count, const std::string& payload_sql);

/// Real outboxd processes sharing one plugin directory (by default holding the scripted
/// fixture), one database and, when `handlers_yaml` is given, one config file whose
/// `handlers:` section it is; each writes its log to its own file.
class Fleet {
public:
    Fleet(std::string database_url, std::map<std::string, std::string> env,
          const std::vector<std::string>& plugin_files = {OUTBOX_FIXTURE_SCRIPTED}, const std::string& handlers_yaml = {});

    /// Starts `outboxd run` as `name`; its output is appended to `<name>.log`.
    [[nodiscard]] std::unique_ptr<ChildProcess> start(const std::string& name,
                                                      const std::map<std::string, std::string>& extra_env = {}) const;
    [[nodiscard]] std::string log(const std::string& name) const;
    [[nodiscard]] std::filesystem::path plugin_dir() const { return dir_.path() / "plugins"; }
    [[nodiscard]] const std::filesystem::path& dir() const { return dir_.path(); }

private:
    std::string url_;
    std::map<std::string, std::string> env_;
    TempDir dir_;
    std::string config_file_;
};

/// The fleet's i-th host's name, "host-<i>".
std::string host_name(std::size_t i);

/// `count` hosts of `fleet`, started as host_name(i).
std::vector<std::unique_ptr<ChildProcess>> start_hosts(const Fleet& fleet, std::size_t count);

/// A random source for a kill schedule; its seed is printed so a failed run can be replayed.
std::mt19937 kill_schedule();

/// Waits (up to `lease_wait`) until a host of `hosts` holds a lease, SIGKILLs it (`preferred`
/// if it holds one, else the next holder after it) and asserts (gtest) that the others live
/// on; raises `max_stuck` to the stuck PROCESSING rows seen then (stuck_processing, 5 s
/// slack), and starts the victim again under its name.
void kill_holding_host_and_restart(const Fleet& fleet, std::vector<std::unique_ptr<ChildProcess>>& hosts,
                                   std::size_t preferred, const std::string& url, std::chrono::seconds lease_wait,
                                   long long& max_stuck);

/// Stops `host` (started as `name`) with SIGTERM and expects a clean exit.
void stop_cleanly(const Fleet& fleet, ChildProcess& host, const std::string& name);

/// Lines of `text` containing `needle`.
int count_lines(const std::string& text, const std::string& needle);

/// A throwaway PostgreSQL cluster of this test's own on a free loopback port (through
/// scripts/pg.sh), migrated, with the scripted fixture's effect table.
class OwnCluster {
public:
    /// With `start_now` false the cluster's directory and port are chosen (url() is final)
    /// but the server starts only at start(): hosts can be started before their database.
    explicit OwnCluster(bool start_now = true);
    void start();
    ~OwnCluster();
    OwnCluster(const OwnCluster&) = delete;
    OwnCluster& operator=(const OwnCluster&) = delete;

    [[nodiscard]] const std::string& url() const noexcept { return url_; }
    /// pg_ctl restart -m `mode` (fast or immediate), waiting until it accepts connections.
    void restart(const std::string& mode) const;

    [[nodiscard]] int port() const noexcept { return port_; }

private:
    std::string dir_;
    int port_ = 0;
    std::string url_;
    bool started_ = false;
};

/// A free loopback port (scripts/pg.sh free-port).
int free_port();

/// socat forwarding 127.0.0.1:port to the cluster, in a process group of its own so that
/// SIGSTOP freezes it and every connection it forked: the path to PostgreSQL goes silent
/// (its kernel still acknowledges, nothing answers).
class SilentableProxy {
public:
    SilentableProxy(int target_port, const std::filesystem::path& log);
    ~SilentableProxy();
    SilentableProxy(const SilentableProxy&) = delete;
    SilentableProxy& operator=(const SilentableProxy&) = delete;

    void freeze() const;
    void thaw() const;
    [[nodiscard]] int port() const noexcept { return port_; }

private:
    int port_;
    ChildProcess process_;
};

/// `url` (postgresql://...@127.0.0.1:PORT/...) with its port replaced by `port`.
std::string via_port(std::string url, int port);
/// The port of `url` (postgresql://...@127.0.0.1:PORT/...).
int port_of(const std::string& url);

}  // namespace outbox::test::fault
