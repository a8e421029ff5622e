// outboxd behind Debian's PgBouncer in transaction mode (database.pool_mode = transaction):
// a fleet keeps every guarantee through kill -9s and a PgBouncer restart, and no server
// connection is ever left with session state of a host (PgBouncer hands it to the next
// client as it is).
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <pqxx/pqxx>
#include <signal.h>

#include "fault/fault_fixture.hpp"
#include "support/child_process.hpp"
#include "support/test_host.hpp"

namespace outbox::test::fault {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr int kPoolSize = 10;

/// PgBouncer 1.18 on 127.0.0.1 in front of `target_port`, pool_mode = transaction, in a
/// directory of its own; started and stopped by pid (as the postgres user when run as root:
/// it refuses root). Its log (stderr) survives restarts.
class PgBouncer {
public:
    explicit PgBouncer(int target_port) : port_(free_port()) {
        char templ[] = "/tmp/outbox-pgbouncer.XXXXXX";
        if (::mkdtemp(templ) == nullptr) throw std::runtime_error("mkdtemp failed");
        dir_ = templ;
        ::chmod(dir_.c_str(), 0755);
        std::ofstream(dir_ / "userlist.txt") << "\"postgres\" \"\"\n";
        // No `ignore_startup_parameters`: a client sending `options` (server settings at
        // connect time) is refused, as in a default installation.
        std::ofstream(dir_ / "pgbouncer.ini")
            << "[databases]\npostgres = host=127.0.0.1 port=" << target_port << " dbname=postgres user=postgres\n"
            << "[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = " << port_ << "\nunix_socket_dir =\n"
            << "auth_type = trust\nauth_file = " << (dir_ / "userlist.txt").string() << "\n"
            << "admin_users = postgres\npool_mode = transaction\ndefault_pool_size = " << kPoolSize << "\n"
            << "max_client_conn = 500\nlog_connections = 0\nlog_disconnections = 1\nlog_pooler_errors = 1\n";
        start();
    }
    ~PgBouncer() {
        stop();
        std::error_code ignored;
        fs::remove_all(dir_, ignored);
    }
    PgBouncer(const PgBouncer&) = delete;
    PgBouncer& operator=(const PgBouncer&) = delete;

    void start() {
        std::vector<std::string> argv{"/usr/sbin/pgbouncer"};
        if (::geteuid() == 0) argv.insert(argv.end(), {"-u", "postgres"});
        argv.push_back((dir_ / "pgbouncer.ini").string());
        process_ = std::make_unique<ChildProcess>(argv, std::map<std::string, std::string>{},
                                                  (dir_ / ("pgbouncer-" + std::to_string(++starts_) + ".log")).string());
        const bool up = wait_until(
            [&] {
                try {
                    return count(url(), "SELECT 1") == 1;
                } catch (const std::exception&) {
                    return false;
                }
            },
            20s);
        if (!up) throw std::runtime_error("PgBouncer did not start:\n" + log());
    }
    /// SIGTERM: PgBouncer's immediate shutdown (every client and server connection dropped).
    void stop() {
        if (!process_) return;
        process_->signal(SIGTERM);
        if (!process_->wait(10s)) {
            process_->signal(SIGKILL);
            process_->wait(10s);
        }
        process_.reset();
    }
    [[nodiscard]] std::string url() const { return "postgresql://postgres@127.0.0.1:" + std::to_string(port_) + "/postgres"; }
    [[nodiscard]] std::string log() const {
        std::string all;
        for (int i = 1; i <= starts_; ++i) all += read_file((dir_ / ("pgbouncer-" + std::to_string(i) + ".log")).string());
        return all;
    }

private:
    int port_;
    fs::path dir_;
    int starts_ = 0;
    std::unique_ptr<ChildProcess> process_;
};

/// Takes every server connection of the pool at once (each client holds a transaction, so
/// each gets its own) and describes any session state a client left on it.
std::vector<std::string> leftover_session_state(const std::string& pooled_url) {
    std::vector<std::unique_ptr<pqxx::connection>> conns;
    std::vector<std::unique_ptr<pqxx::work>> txs;
    std::vector<std::string> found;
    std::set<int> backends;
    for (int i = 0; i < kPoolSize; ++i) {
        conns.push_back(std::make_unique<pqxx::connection>(pooled_url));
        txs.push_back(std::make_unique<pqxx::work>(*conns.back()));
        const pqxx::row row = txs.back()->exec1(
            "SELECT pg_backend_pid(), (SELECT count(*) FROM pg_prepared_statements), "
            "(SELECT count(*) FROM pg_listening_channels()), current_setting('statement_timeout'), "
            "current_setting('synchronous_commit'), current_setting('enable_seqscan'), current_setting('enable_bitmapscan')");
        backends.insert(row[0].as<int>());
        const std::string where = "server backend " + row[0].as<std::string>() + ": ";
        if (row[1].as<long long>() != 0) found.push_back(where + row[1].as<std::string>() + " prepared statement(s)");
        if (row[2].as<long long>() != 0) found.push_back(where + "LISTENs on " + row[2].as<std::string>() + " channel(s)");
        if (row[3].as<std::string>() != "0") found.push_back(where + "statement_timeout = " + row[3].as<std::string>());
        if (row[4].as<std::string>() != "on") found.push_back(where + "synchronous_commit = " + row[4].as<std::string>());
        if (row[5].as<std::string>() != "on") found.push_back(where + "enable_seqscan = " + row[5].as<std::string>());
        if (row[6].as<std::string>() != "on") found.push_back(where + "enable_bitmapscan = " + row[6].as<std::string>());
    }
    EXPECT_EQ(backends.size(), static_cast<std::size_t>(kPoolSize)) << "the sweep reached every server connection";
    return found;
}

std::string joined(const std::vector<std::string>& lines) {
    std::string out;
    for (const auto& line : lines) out += line + "\n";
    return out;
}

/// PgBouncer's own reports of a server connection a client left unusable or refused: an idle
/// server that sent something (a LISTEN heard a NOTIFY), a startup parameter it refuses
/// (`options`), a server connection that broke under a client.
void expect_no_dirty_reports(const std::string& log) {
    for (const char* report : {"got dirty", "unsupported startup parameter", "server conn crashed?"}) {
        EXPECT_EQ(count_lines(log, report), 0) << "PgBouncer reported \"" << report << "\":\n" << log.substr(0, 20000);
    }
}

TEST(PgBouncerTransactionMode, SixHostsKilledAndPoolerRestartedLoseNothingAndLeaveNoSessionState) {
    constexpr int kEvents = 50'000;
    constexpr int kKills = 6;
    constexpr int kMaxAttempts = 10;
    const OwnCluster cluster;
    PgBouncer bouncer(cluster.port());
    // 60% succeed at once, 25% fail once, 15% fail twice; every event writes a DB effect
    // through ctx.db() (through PgBouncer). Half the events are published while hosts run,
    // so their NOTIFYs reach any server connection left LISTENing.
    const std::string payload =
        "jsonb_build_object('db', true, 'sleep_ms', abs(hashtext('s' || g)) % 4, 'fail_times', "
        "CASE WHEN abs(hashtext(g::text)) % 100 < 60 THEN 0 WHEN abs(hashtext(g::text)) % 100 < 85 THEN 1 ELSE 2 END)";
    publish_generated(cluster.url(), kEvents / 2, payload);

    const Fleet fleet(bouncer.url(), {{"OUTBOX_DATABASE_POOL_MODE", "transaction"},
                                      {"OUTBOX_DATABASE_SESSION_URL", cluster.url()},
                                      {"OUTBOX_LEASE_DURATION", "3s"},
                                      {"OUTBOX_CONCURRENCY", "8"},
                                      {"OUTBOX_BATCH_SIZE", "50"},
                                      {"OUTBOX_POLL_INTERVAL", "500ms"},
                                      {"OUTBOX_INITIAL_BACKOFF", "100ms"},
                                      {"OUTBOX_MAX_BACKOFF", "500ms"},
                                      {"OUTBOX_MAX_ATTEMPTS", std::to_string(kMaxAttempts)}});
    auto hosts = start_hosts(fleet, 6);
    const auto name = host_name;
    std::mt19937 random = kill_schedule();
    std::uniform_int_distribution<int> pause_ms(300, 1500);
    std::uniform_int_distribution<std::size_t> pick(0, hosts.size() - 1);
    long long max_stuck = 0;
    int published = kEvents / 2;

    for (int kill = 0; kill < kKills; ++kill) {
        std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms(random)));
        if (kill == kKills / 2) {
            // The pooler goes away under every host and comes back on the same port, once the
            // host restarted by the last kill is running (a host that cannot reach the
            // database at start-up exits, for its supervisor to start it again).
            const auto starts = [&] {
                int n = 0;
                for (std::size_t i = 0; i < hosts.size(); ++i) n += count_lines(fleet.log(name(i)), ") started as ");
                return n;
            };
            ASSERT_TRUE(wait_until([&] { return starts() == static_cast<int>(hosts.size()) + kill; }, 30s))
                << "every host started before the pooler restart: " << starts();
            bouncer.stop();
            std::this_thread::sleep_for(1s);
            bouncer.start();
        }
        // Published after the restart: the hosts may have finished everything earlier while
        // the pooler came back, and the kill must land mid-run.
        const int more = (kEvents - published) / (kKills - kill);
        publish_generated(cluster.url(), more, payload);
        published += more;
        const std::size_t victim = pick(random);
        ASSERT_GT(unsettled(cluster.url()), 0) << "kill " << kill << " must land mid-run for the test to mean anything";
        ASSERT_NO_FATAL_FAILURE(kill_holding_host_and_restart(fleet, hosts, victim, cluster.url(), 30s, max_stuck));
    }
    ASSERT_EQ(published, kEvents);

    const bool settled = wait_until(
        [&] {
            max_stuck = std::max(max_stuck, stuck_processing(cluster.url(), 5s));
            return unsettled(cluster.url()) == 0;
        },
        180s);
    ASSERT_TRUE(settled) << status_summary(cluster.url()) << "\n" << fleet.log(name(0));
    for (std::size_t i = 0; i < hosts.size(); ++i) stop_cleanly(fleet, *hosts[i], name(i));

    EXPECT_EQ(count(cluster.url(), "SELECT count(*) FROM event_publication"), kEvents);
    EXPECT_EQ(max_stuck, 0) << "a dead host's PROCESSING rows are recovered within a few seconds of their lease";
    EXPECT_EQ(count(cluster.url(), "SELECT count(*) FROM event_publication WHERE status <> 'COMPLETED'"), 0)
        << "every event COMPLETED (" << kMaxAttempts << " attempts cover the scripted failures and the kills)";
    expect_final_invariants(cluster.url(), {}, kEvents);
    EXPECT_EQ(count(cluster.url(), "SELECT count(*) FROM event_publication WHERE status = 'COMPLETED' "
                                   "AND attempt_count < (payload->>'fail_times')::int + 1"),
              0)
        << "the scripted failures really happened";
    // An event left unfinished: every host's log lines about it (whole logs are too large to
    // print), which tell whose runs overlapped and when each lease was lost.
    if (::testing::Test::HasFailure()) {
        pqxx::connection conn{cluster.url()};
        pqxx::nontransaction tx{conn};
        for (const auto& row : tx.exec("SELECT event_id::text FROM event_publication WHERE status <> 'COMPLETED' LIMIT 3")) {
            const std::string id = row[0].c_str();
            std::string lines;
            for (std::size_t i = 0; i < hosts.size(); ++i) {
                std::istringstream log(fleet.log(name(i)));
                for (std::string line; std::getline(log, line);) {
                    if (line.find(id) != std::string::npos) lines += name(i) + ": " + line + "\n";
                }
            }
            std::cout << "what the hosts logged about " << id << ":\n" << lines;
        }
    }

    const std::vector<std::string> leftovers = leftover_session_state(bouncer.url());
    EXPECT_TRUE(leftovers.empty()) << "a host left session state on a pooled server connection:\n" << joined(leftovers);
    EXPECT_EQ(count(cluster.url(), "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"), 0)
        << "no session advisory lock outlives the hosts";
    expect_no_dirty_reports(bouncer.log());
    for (std::size_t i = 0; i < hosts.size(); ++i) {
        EXPECT_EQ(count_lines(fleet.log(name(i)), "does not LISTEN"), 0) << "with session_url, hosts LISTEN there";
    }
}

// Fleet-wide limits are rows with an expiry, not session locks: through the pooler three
// hosts together keep a handler's max_concurrency, and no slot leaves anything on a server
// connection.
TEST(PgBouncerTransactionMode, ThreeHostsKeepAFleetWideConcurrencyLimitThroughThePooler) {
    constexpr int kEvents = 24;
    constexpr double kCall = 0.15;
    const OwnCluster cluster;
    PgBouncer bouncer(cluster.port());
    const Fleet fleet(bouncer.url(),
                      {{"OUTBOX_DATABASE_POOL_MODE", "transaction"},
                       {"OUTBOX_DATABASE_SESSION_URL", cluster.url()},
                       {"OUTBOX_POLL_INTERVAL", "200ms"}},
                      {OUTBOX_FIXTURE_SCRIPTED}, "  scripted:\n    max_concurrency: 2\n");
    // Each row records when its call started; a call runs at least its 150 ms sleep, so
    // three starts within 150 ms are three calls in flight. Rows written at the end of a
    // call can be bunched by a stall of the pooler or the database.
    publish_generated(cluster.url(), kEvents, "jsonb_build_object('db', true, 'db_at_start', true, 'sleep_ms', 150)");
    std::array<std::unique_ptr<ChildProcess>, 3> hosts;
    const auto name = [](std::size_t i) { return "host-" + std::to_string(i); };
    for (std::size_t i = 0; i < hosts.size(); ++i) hosts[i] = fleet.start(name(i));
    ASSERT_TRUE(wait_until([&] { return unsettled(cluster.url()) == 0; }, 60s))
        << status_summary(cluster.url()) << "\n" << fleet.log(name(0));
    for (std::size_t i = 0; i < hosts.size(); ++i) stop_cleanly(fleet, *hosts[i], name(i));

    expect_final_invariants(cluster.url(), {}, kEvents);
    const int worst = worst_call_overlap(scripted_effect_times(cluster.url()), kCall);
    EXPECT_LE(worst, 2) << "calls in flight at once across the fleet";
    EXPECT_EQ(worst, 2) << "both slots are used";
    const std::vector<std::string> leftovers = leftover_session_state(bouncer.url());
    EXPECT_TRUE(leftovers.empty()) << joined(leftovers);
    EXPECT_EQ(count(cluster.url(), "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"), 0);
    expect_no_dirty_reports(bouncer.log());
}

TEST(PgBouncerTransactionMode, WithoutSessionUrlHostsSayOnceThatTheyPollAndStillCompleteEvents) {
    const OwnCluster cluster;
    PgBouncer bouncer(cluster.port());
    const Fleet fleet(bouncer.url(), {{"OUTBOX_DATABASE_POOL_MODE", "transaction"},
                                      {"OUTBOX_POLL_INTERVAL", "200ms"},
                                      {"OUTBOX_INITIAL_BACKOFF", "100ms"}});

    // Migrations hold a session lock: they need a direct connection and say so.
    const auto [code, output] =
        run_command({OUTBOXD_BINARY, "migrate"},
                    {{"OUTBOX_DATABASE_URL", bouncer.url()}, {"OUTBOX_DATABASE_POOL_MODE", "transaction"}}, 30s);
    EXPECT_EQ(code, 2) << output;
    EXPECT_NE(output.find("database.session_url"), std::string::npos) << output;

    auto host = fleet.start("host-0");
    publish_generated(cluster.url(), 500,
                      "jsonb_build_object('db', true, 'fail_times', CASE WHEN g % 5 = 0 THEN 1 ELSE 0 END)");
    ASSERT_TRUE(wait_until([&] { return unsettled(cluster.url()) == 0; }, 60s))
        << status_summary(cluster.url()) << "\n" << fleet.log("host-0");
    publish_generated(cluster.url(), 100, "jsonb_build_object('db', true)");
    ASSERT_TRUE(wait_until([&] { return unsettled(cluster.url()) == 0; }, 60s)) << status_summary(cluster.url());
    stop_cleanly(fleet, *host, "host-0");

    expect_final_invariants(cluster.url(), {}, 600);
    EXPECT_EQ(count_lines(fleet.log("host-0"), "does not LISTEN"), 1) << fleet.log("host-0");
    EXPECT_EQ(count(cluster.url(), "SELECT count(*) FROM pg_stat_activity WHERE query ILIKE 'LISTEN%'"), 0);
    const std::vector<std::string> leftovers = leftover_session_state(bouncer.url());
    EXPECT_TRUE(leftovers.empty()) << joined(leftovers);
    expect_no_dirty_reports(bouncer.log());
}

}  // namespace
}  // namespace outbox::test::fault
