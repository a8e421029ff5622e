// Failover to a promoted standby: a primary and a streaming standby (synchronous
// replication) on loopback, three `outboxd run` hosts whose database.url names both in
// libpq's multi-host syntax, and an application publishing in known batches. The primary
// dies (kill -9 of the postmaster and every process it started: the server is gone at once,
// as when its machine dies) mid-run and the standby is promoted. The hosts must reconnect to
// the promoted server, listen and prepare again there, and finish: every event whose publish
// returned is COMPLETED, each with exactly one effect row, nothing left PROCESSING.
#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <iostream>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <pqxx/pqxx>

#include "db/migrator.hpp"
#include "fault/fault_fixture.hpp"
#include "support/child_process.hpp"
#include "support/test_host.hpp"

namespace outbox::test::fault {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Cluster commands here include a base backup and a promotion: a longer bound than the
// fixture's default.
std::string sh(const std::string& script) { return fault::shell(script, 180s); }

const std::string kPgSh = std::string(OUTBOX_SOURCE_DIR) + "/scripts/pg.sh";
// pg.sh's own rules: the newest installed server unless PG_BIN says otherwise, and the
// postgres user when running as root.
const std::string kPrelude =
    "set -euo pipefail; bin=${PG_BIN:-/usr/lib/postgresql/15/bin}; "
    "[[ -x $bin/pg_ctl ]] || bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1); "
    "as=(); ((EUID == 0)) && as=(runuser -u postgres --); ";


std::string temp_dir(const std::string& prefix) {
    std::string templ = "/tmp/" + prefix + ".XXXXXX";
    if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    return templ;
}

/// A primary (scripts/pg.sh) and a standby cloned from it with pg_basebackup -R, streaming
/// on loopback; the primary waits for the standby's flush before a commit returns.
class ReplicatedPair {
public:
    ReplicatedPair() : primary_dir_(temp_dir("outbox-failover-primary")), standby_dir_(temp_dir("outbox-failover-standby")) {
        try {
            set_up();
        } catch (...) {
            tear_down();
            throw;
        }
    }

    ~ReplicatedPair() { tear_down(); }
    ReplicatedPair(const ReplicatedPair&) = delete;
    ReplicatedPair& operator=(const ReplicatedPair&) = delete;

private:
    void set_up() {
        primary_port_ = std::stoi(last_line(sh(kPgSh + " free-port")));
        primary_url_ = last_line(sh(kPgSh + " start " + primary_dir_ + " " + std::to_string(primary_port_)));
        primary_started_ = true;
        {
            pqxx::connection conn(primary_url_);
            db::Migrator{}.migrate(conn);
        }
        create_scripted_effect_table(primary_url_);

        do {
            standby_port_ = std::stoi(last_line(sh(kPgSh + " free-port")));
        } while (standby_port_ == primary_port_);
        // Laid out like a pg.sh cluster (its marker, data/, log), so pg.sh stop removes it.
        sh(kPrelude + "d=" + standby_dir_ + "; touch $d/.outbox-throwaway-cluster; "
              "((EUID == 0)) && chown postgres:postgres $d $d/.outbox-throwaway-cluster; "
              "\"${as[@]}\" \"$bin/pg_basebackup\" -D $d/data -R -X stream --checkpoint=fast -h 127.0.0.1 -p " +
              std::to_string(primary_port_) + " -U postgres; "
              "printf \"port = %s\\nunix_socket_directories = '%s'\\ncluster_name = 'standby'\\n\" " +
              std::to_string(standby_port_) + " $d | \"${as[@]}\" tee -a $d/data/postgresql.conf >/dev/null; "
              "\"${as[@]}\" \"$bin/pg_ctl\" -D $d/data -l $d/log -w -t 60 start >/dev/null");
        standby_started_ = true;
        standby_url_ = "postgresql://postgres@127.0.0.1:" + std::to_string(standby_port_) + "/postgres";

        // Set after the clone, so the standby (promoted) does not wait for a standby of its own.
        pqxx::connection conn(primary_url_);
        {
            pqxx::nontransaction tx(conn);
            tx.exec("ALTER SYSTEM SET synchronous_standby_names = 'standby'");
            tx.exec("SELECT pg_reload_conf()");
        }
        if (!wait_until([&] {
                pqxx::nontransaction check(conn);
                return check.exec("SELECT 1 FROM pg_stat_replication WHERE application_name = 'standby' "
                                  "AND sync_state = 'sync' AND state = 'streaming'")
                           .size() == 1;
            }, 60s)) {
            throw std::runtime_error("the standby did not become a synchronous standby");
        }
    }

    void tear_down() noexcept {
        // The killed primary's directory is removed without a server to stop.
        for (const auto& [dir, started] : {std::pair{standby_dir_, standby_started_}, std::pair{primary_dir_, primary_started_}}) {
            try {
                if (started) {
                    sh(kPgSh + " stop " + dir);
                } else {
                    std::filesystem::remove_all(dir);
                }
            } catch (const std::exception& e) {
                ADD_FAILURE() << e.what();
            }
        }
    }

public:

    /// Both servers in libpq's multi-host syntax, asking for the one that accepts writes.
    [[nodiscard]] std::string failover_url() const {
        return "postgresql://postgres@127.0.0.1:" + std::to_string(primary_port_) + ",127.0.0.1:" +
               std::to_string(standby_port_) + "/postgres?target_session_attrs=read-write&connect_timeout=2";
    }
    [[nodiscard]] const std::string& primary_url() const { return primary_url_; }
    [[nodiscard]] const std::string& standby_url() const { return standby_url_; }

    /// SIGKILL to the primary's postmaster and to every process it started.
    void kill_primary() {
        const int postmaster = std::stoi(last_line(sh("head -n 1 " + primary_dir_ + "/data/postmaster.pid")));
        std::vector<int> children;
        std::istringstream ps(sh("ps -o pid= --ppid " + std::to_string(postmaster) + " || true"));
        for (int pid = 0; ps >> pid;) children.push_back(pid);
        ::kill(postmaster, SIGKILL);
        for (const int pid : children) ::kill(pid, SIGKILL);
        // The port closes with the last of them.
        if (!wait_until([&] {
                return run_command({"/bin/bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/" + std::to_string(primary_port_)}, {},
                                   5s).first != 0;
            }, 30s)) {
            throw std::runtime_error("the killed primary still accepts connections");
        }
    }

    void promote_standby() const {
        sh(kPrelude + "\"${as[@]}\" \"$bin/pg_ctl\" -D " + standby_dir_ + "/data -w -t 60 promote >/dev/null");
    }

private:
    std::string primary_dir_, standby_dir_;
    int primary_port_ = 0, standby_port_ = 0;
    std::string primary_url_, standby_url_;
    bool primary_started_ = false, standby_started_ = false;
};

/// The application: publishes kBatches batches of kBatchSize events, each batch one
/// transaction through the failover URL: kHeadStart batches at once, then one every 150 ms,
/// so that there is a backlog at the failover and publishing goes on across it. A
/// batch whose commit returned is `committed`; one whose statement or commit failed after it
/// was sent is `in_doubt` (all or nothing of it may exist); a batch that could not even
/// connect is tried again.
class Publisher {
public:
    static constexpr int kBatches = 200;
    static constexpr int kBatchSize = 100;
    static constexpr int kHeadStart = 60;

    explicit Publisher(std::string url) : url_(std::move(url)), thread_([this](std::stop_token stop) { run(stop); }) {}

    [[nodiscard]] bool done() const { return done_; }
    [[nodiscard]] int attempted() const { return attempted_; }
    [[nodiscard]] std::set<int> committed() const {
        std::lock_guard lock(mutex_);
        return committed_;
    }
    [[nodiscard]] std::set<int> in_doubt() const {
        std::lock_guard lock(mutex_);
        return in_doubt_;
    }

private:
    void run(std::stop_token stop) {
        std::unique_ptr<pqxx::connection> conn;
        for (int batch = 0; batch < kBatches && !stop.stop_requested();) {
            try {
                if (!conn || !conn->is_open()) conn = std::make_unique<pqxx::connection>(url_);
            } catch (const std::exception&) {
                conn.reset();
                std::this_thread::sleep_for(200ms);
                continue;  // nothing was sent: the same batch again
            }
            try {
                pqxx::work tx(*conn);
                tx.exec_params("SELECT outbox_publish('acme', 'TestRequested', jsonb_build_object('db', true, "
                               "'batch', $1::int, 'i', g)) FROM generate_series(1, $2::int) AS g",
                               batch, kBatchSize);
                tx.commit();
                std::lock_guard lock(mutex_);
                committed_.insert(batch);
            } catch (const std::exception&) {
                conn.reset();
                std::lock_guard lock(mutex_);
                in_doubt_.insert(batch);
            }
            attempted_ = ++batch;
            // A head start builds a backlog; then a steady flow that outlasts the failover.
            if (batch >= kHeadStart) std::this_thread::sleep_for(150ms);
        }
        done_ = true;
    }

    std::string url_;
    mutable std::mutex mutex_;
    std::set<int> committed_, in_doubt_;
    std::atomic<int> attempted_{0};
    std::atomic<bool> done_{false};
    std::jthread thread_;
};

double seconds_between(Clock::time_point from, Clock::time_point to) {
    return std::chrono::duration<double>(to - from).count();
}

/// Sessions of host `name` on the server at `url` whose last statement was a LISTEN: the
/// wake-up listener's connection, which sends nothing after its LISTENs.
long long listening_sessions(const std::string& url, const std::string& name) {
    return count(url, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'outboxd " + name +
                          "' AND query ILIKE 'LISTEN%outboxd_%'");
}

TEST(Failover, HostsFollowAPromotedStandbyAndEveryCommittedEventCompletesOnce) {
    ReplicatedPair pair;
    const std::string url = pair.failover_url();
    // Defaults everywhere: the bound the documentation states is the defaults' bound.
    const Fleet fleet(url, {});
    const std::vector<std::string> names{"host-a", "host-b", "host-c"};
    std::vector<std::unique_ptr<ChildProcess>> hosts;
    for (const auto& name : names) hosts.push_back(fleet.start(name));

    const auto completed = [](const std::string& at) {
        return count(at, "SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'");
    };
    std::optional<Publisher> publisher;
    publisher.emplace(url);

    for (const auto& name : names) {
        EXPECT_TRUE(wait_until([&] { return listening_sessions(pair.primary_url(), name) >= 1; }, 30s)) << name;
    }
    // Mid-run: publishing has not finished and a good part of the events is done.
    ASSERT_TRUE(wait_until([&] { return completed(pair.primary_url()) >= 2000 || publisher->done(); }, 180s))
        << status_summary(pair.primary_url());
    ASSERT_FALSE(publisher->done()) << "publishing must span the failover";
    ASSERT_GT(unsettled(pair.primary_url()), 0) << "the primary must die mid-run";
    const long long before_kill = completed(pair.primary_url());
    const int batches_before_kill = publisher->attempted();

    const auto killed_at = Clock::now();
    pair.kill_primary();
    pair.promote_standby();
    const auto promoted_at = Clock::now();
    const long long at_promotion = completed(pair.standby_url());

    // Each host says once that the database came back, and the fleet completes events on
    // the promoted server again.
    std::vector<std::optional<Clock::time_point>> back(names.size());
    std::optional<Clock::time_point> resumed;
    const bool all_back = wait_until(
        [&] {
            for (std::size_t i = 0; i < names.size(); ++i) {
                if (!back[i] && count_lines(fleet.log(names[i]), "database reachable again") >= 1) back[i] = Clock::now();
            }
            if (!resumed && completed(pair.standby_url()) > at_promotion) resumed = Clock::now();
            return resumed && std::all_of(back.begin(), back.end(), [](const auto& t) { return t.has_value(); });
        },
        120s);
    ASSERT_TRUE(all_back) << status_summary(pair.standby_url()) << "\n" << fleet.log(names[0]);
    std::ostringstream measured;
    measured << "failover: primary killed after " << before_kill << " completions and " << batches_before_kill
             << " publish batches; kill to promoted " << seconds_between(killed_at, promoted_at) << " s; promoted to "
             << "first completion on the new primary " << seconds_between(promoted_at, *resumed) << " s; hosts back after";
    for (std::size_t i = 0; i < names.size(); ++i) {
        measured << " " << names[i] << " " << seconds_between(promoted_at, *back[i]) << " s";
        // The bound the documentation states, with defaults: resumed within 30 s of the promotion.
        EXPECT_LE(seconds_between(promoted_at, *back[i]), 30.0) << names[i] << "\n" << fleet.log(names[i]);
    }
    // Woken by NOTIFY on the new server too, not only by polling: each host LISTENs there.
    for (const auto& name : names) {
        EXPECT_TRUE(wait_until([&] { return listening_sessions(pair.standby_url(), name) >= 1; }, 30s))
            << name << " does not LISTEN on the promoted server\n" << fleet.log(name);
    }
    std::cout << measured.str() << std::endl;
    RecordProperty("failover_measurements", measured.str());

    ASSERT_TRUE(wait_until([&] { return publisher->done(); }, 120s)) << "publishing did not finish";
    const std::set<int> committed = publisher->committed();
    const std::set<int> in_doubt = publisher->in_doubt();
    publisher.reset();
    const std::string& now_primary = pair.standby_url();
    ASSERT_TRUE(wait_until([&] { return unsettled(now_primary) == 0; }, 180s)) << status_summary(now_primary);

    for (std::size_t i = 0; i < names.size(); ++i) {
        const std::string log = fleet.log(names[i]);
        EXPECT_EQ(count_lines(log, "database unavailable"), 1) << "one line for the outage\n" << log;
        EXPECT_EQ(count_lines(log, "database reachable again"), 1) << "one line for the recovery\n" << log;
        stop_cleanly(fleet, *hosts[i], names[i]);
    }

    // A batch is one transaction: all of it or none of it survives. Every batch whose commit
    // returned survives (synchronous replication); a batch in doubt may go either way.
    std::map<int, long long> per_batch;
    {
        pqxx::connection conn(now_primary);
        pqxx::nontransaction tx(conn);
        for (const auto& row : tx.exec("SELECT (payload->>'batch')::int, count(*) FROM event_publication GROUP BY 1")) {
            per_batch[row[0].as<int>()] = row[1].as<long long>();
        }
    }
    long long events = 0;
    for (int batch = 0; batch < Publisher::kBatches; ++batch) {
        const long long n = per_batch.contains(batch) ? per_batch[batch] : 0;
        events += n;
        EXPECT_TRUE(n == 0 || n == Publisher::kBatchSize) << "batch " << batch << " is partly there: " << n;
        if (committed.contains(batch)) {
            EXPECT_EQ(n, Publisher::kBatchSize) << "batch " << batch << " committed, then lost";
        } else if (n > 0) {
            EXPECT_TRUE(in_doubt.contains(batch)) << "batch " << batch << " was never published";
        }
    }
    EXPECT_TRUE(per_batch.empty() || (per_batch.begin()->first >= 0 && per_batch.rbegin()->first < Publisher::kBatches));
    EXPECT_GE(events, static_cast<long long>(committed.size()) * Publisher::kBatchSize);
    std::cout << "failover: " << committed.size() << " batches committed, " << in_doubt.size() << " in doubt, "
              << events << " events on the promoted server" << std::endl;
    // Every surviving event COMPLETED with one consumption row, no lease left, exactly one
    // effect row per event and none without its consumption row.
    expect_final_invariants(now_primary, {}, events);
}

}  // namespace
}  // namespace outbox::test::fault
