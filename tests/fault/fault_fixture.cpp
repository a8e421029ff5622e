#include "fault/fault_fixture.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <stdexcept>

#include <pqxx/pqxx>
#include <signal.h>

#include "db/migrator.hpp"
#include "support/test_host.hpp"

namespace outbox::test::fault {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

pqxx::result query(const std::string& url, const std::string& sql) {
    pqxx::connection conn(url);
    pqxx::work tx(conn);
    pqxx::result result = tx.exec(sql);
    tx.commit();
    return result;
}


std::string pg_script() { return std::string(OUTBOX_SOURCE_DIR) + "/scripts/pg.sh"; }

}  // namespace

std::string last_line(const std::string& text) {
    std::string line, last;
    std::istringstream in(text);
    while (std::getline(in, line)) {
        if (!line.empty()) last = line;
    }
    return last;
}

std::string shell(const std::string& script, std::chrono::seconds timeout) {
    const auto [code, output] = run_command({"/bin/bash", "-c", script}, {}, timeout);
    if (code != 0) throw std::runtime_error("command failed (" + std::to_string(code) + "): " + script + "\n" + output);
    return output;
}

long long count(const std::string& url, const std::string& sql) {
    const pqxx::result result = query(url, sql);
    return result.at(0).at(0).as<long long>();
}

long long unsettled(const std::string& url) {
    return count(url, "SELECT count(*) FROM event_publication WHERE status NOT IN ('COMPLETED', 'REVIEW_REQUIRED')");
}

long long stuck_processing(const std::string& url, std::chrono::seconds slack) {
    return count(url, "SELECT count(*) FROM event_publication WHERE status = 'PROCESSING' AND lease_expires_at < now() - "
                      "interval '" + std::to_string(slack.count()) + " seconds'");
}

std::string status_summary(const std::string& url) {
    const pqxx::result result = query(
        url, "SELECT coalesce(string_agg(status || coalesce('/' || last_error_code, '') || '=' || n, ', '), 'none') "
             "FROM (SELECT status, last_error_code, count(*) n FROM event_publication GROUP BY 1, 2 ORDER BY 1, 2) s");
    return result.at(0).at(0).as<std::string>();
}

void expect_final_invariants(const std::string& url, const std::set<std::string>& review_codes,
                             std::optional<long long> scripted_effects, const std::string& handler) {
    SCOPED_TRACE(status_summary(url));
    EXPECT_EQ(unsettled(url), 0) << "every event ends COMPLETED or REVIEW_REQUIRED";
    for (const auto& row : query(url, "SELECT DISTINCT last_error_code FROM event_publication "
                                      "WHERE status = 'REVIEW_REQUIRED'")) {
        const std::string code = row[0].is_null() ? "<null>" : row[0].as<std::string>();
        EXPECT_TRUE(review_codes.contains(code)) << "REVIEW_REQUIRED with an unexpected code " << code;
    }
    // A completion in the first attempt writes no row (the status says it); a later one
    // writes the handler's row.
    EXPECT_EQ(count(url, "SELECT count(*) FROM event_publication e WHERE status = 'COMPLETED' AND "
                         "(SELECT count(*) FROM event_consumption c WHERE c.event_id = e.event_id "
                         "AND c.handler_name = '" + handler + "') <> CASE WHEN e.attempt_count = 1 THEN 0 ELSE 1 END"),
              0)
        << "every COMPLETED event has one consumption row for its handler, none if it completed in its first attempt";
    EXPECT_EQ(count(url, "SELECT count(*) FROM event_publication WHERE status = 'PROCESSING' "
                         "OR lease_token IS NOT NULL OR lease_owner IS NOT NULL"),
              0)
        << "no lease left behind";
    if (!scripted_effects) return;
    EXPECT_EQ(count(url, "SELECT count(*) FROM (SELECT event_id, handler_name FROM scripted_effect "
                         "GROUP BY 1, 2 HAVING count(*) > 1) d"),
              0)
        << "no handler DB effect committed twice";
    EXPECT_EQ(count(url, "SELECT count(*) FROM scripted_effect s WHERE NOT EXISTS (SELECT 1 FROM event_consumption c "
                         "WHERE c.event_id = s.event_id AND c.handler_name = s.handler_name) "
                         "AND NOT EXISTS (SELECT 1 FROM event_publication e WHERE e.event_id = s.event_id "
                         "AND e.status = 'COMPLETED' AND e.attempt_count = 1)"),
              0)
        << "an effect commits only together with its consumption row or its event's first-attempt completion";
    EXPECT_EQ(count(url, "SELECT count(*) FROM scripted_effect"), *scripted_effects);
}

void publish_generated(const std::string& url, int count, const std::string& payload_sql) {
    pqxx::connection conn(url);
    for (int done = 0; done < count;) {
        const int n = std::min(1000, count - done);
        pqxx::work tx(conn);
        tx.exec_params("SELECT outbox_publish('acme', 'TestRequested', " + payload_sql +
                           ") FROM generate_series($1::int, $2::int) AS g",
                       done, done + n - 1);
        tx.commit();
        done += n;
    }
}

Fleet::Fleet(std::string database_url, std::map<std::string, std::string> env,
             const std::vector<std::string>& plugin_files, const std::string& handlers_yaml)
    : url_(std::move(database_url)), env_(std::move(env)) {
    fs::create_directory(plugin_dir());
    for (const auto& file : plugin_files) {
        const std::string name = fs::path(file).filename().string();
        // The fixtures' file names carry a target prefix operators would not use.
        fs::copy_file(file, plugin_dir() / (name == fs::path(OUTBOX_FIXTURE_SCRIPTED).filename() ? "libscripted.so" : name));
    }
    if (!handlers_yaml.empty()) {
        config_file_ = (dir_.path() / "outboxd.yaml").string();
        std::ofstream(config_file_) << "handlers:\n" << handlers_yaml;
    }
    env_["OUTBOX_DATABASE_URL"] = url_;
    env_["OUTBOX_PLUGIN_DIR"] = plugin_dir().string();
    env_.try_emplace("OUTBOX_ADMIN_LISTEN", "off");
}

std::unique_ptr<ChildProcess> Fleet::start(const std::string& name,
                                           const std::map<std::string, std::string>& extra_env) const {
    auto env = env_;
    for (const auto& [key, value] : extra_env) env[key] = value;
    env.try_emplace("OUTBOX_HOST_ID", name);
    std::vector<std::string> argv{OUTBOXD_BINARY, "run"};
    if (!config_file_.empty()) argv.insert(argv.end(), {"--config", config_file_});
    return std::make_unique<ChildProcess>(argv, env, (dir_.path() / (name + ".log")).string());
}

std::string Fleet::log(const std::string& name) const { return read_file((dir_.path() / (name + ".log")).string()); }

std::string host_name(std::size_t i) { return "host-" + std::to_string(i); }

std::vector<std::unique_ptr<ChildProcess>> start_hosts(const Fleet& fleet, std::size_t count) {
    std::vector<std::unique_ptr<ChildProcess>> hosts(count);
    for (std::size_t i = 0; i < count; ++i) hosts[i] = fleet.start(host_name(i));
    return hosts;
}

std::mt19937 kill_schedule() {
    const auto seed = std::random_device{}();
    std::cout << "kill schedule seed: " << seed << "\n";
    return std::mt19937(seed);
}

void kill_holding_host_and_restart(const Fleet& fleet, std::vector<std::unique_ptr<ChildProcess>>& hosts,
                                   std::size_t preferred, const std::string& url, std::chrono::seconds lease_wait,
                                   long long& max_stuck) {
    // Killed while it holds leases: then every kill costs its events an attempt, which the
    // tests count. The preferred host, or the next one after it that holds leases: a host
    // restarted a moment ago, or one that wins few claims late in a run on a loaded
    // machine, may hold none for a long time.
    std::size_t victim = hosts.size();
    const auto find_holder = [&] {
        std::set<std::string> holders;
        for (const auto& row : query(url, "SELECT DISTINCT lease_owner FROM event_publication WHERE status = 'PROCESSING'")) {
            if (!row[0].is_null()) holders.insert(row[0].as<std::string>());
        }
        for (std::size_t step = 0; step < hosts.size(); ++step) {
            const std::size_t i = (preferred + step) % hosts.size();
            if (holders.contains(host_name(i))) {
                victim = i;
                return true;
            }
        }
        return false;
    };
    if (!wait_until(find_holder, lease_wait)) {
        // Whether the backlog drained before a kill could land, or the hosts stalled: the
        // statuses, and what each host logged last.
        std::string tails;
        for (std::size_t i = 0; i < hosts.size(); ++i) {
            const std::string log = fleet.log(host_name(i));
            tails += "--- " + host_name(i) + " (last lines)\n" + log.substr(log.size() > 3000 ? log.size() - 3000 : 0);
        }
        FAIL() << "no host held a lease for " << lease_wait.count() << " s; events: " << status_summary(url) << "\n"
               << tails;
    }
    hosts[victim]->signal(SIGKILL);
    ASSERT_EQ(hosts[victim]->wait(10s), std::optional<int>(128 + SIGKILL));
    for (std::size_t i = 0; i < hosts.size(); ++i) {
        if (i == victim) continue;
        ASSERT_FALSE(hosts[i]->wait(0ms)) << host_name(i) << " died:\n" << fleet.log(host_name(i));
    }
    max_stuck = std::max(max_stuck, stuck_processing(url, 5s));
    hosts[victim] = fleet.start(host_name(victim));
}

void stop_cleanly(const Fleet& fleet, ChildProcess& host, const std::string& name) {
    host.signal(SIGTERM);
    const auto code = host.wait(30s);
    EXPECT_EQ(code, std::optional<int>(0)) << name << " did not stop cleanly:\n" << fleet.log(name);
}

int count_lines(const std::string& text, const std::string& needle) {
    int n = 0;
    std::string line;
    std::istringstream in(text);
    while (std::getline(in, line)) n += line.find(needle) != std::string::npos ? 1 : 0;
    return n;
}

OwnCluster::OwnCluster(bool start_now) {
    char templ[] = "/tmp/outbox-fault-pg.XXXXXX";
    if (::mkdtemp(templ) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = templ;
    port_ = std::stoi(last_line(shell(pg_script() + " free-port")));
    url_ = "postgresql://postgres@127.0.0.1:" + std::to_string(port_) + "/postgres";  // what pg.sh start prints
    if (start_now) start();
}

void OwnCluster::start() {
    // Without fsync (pg.sh --non-durable): a killed or restarted server loses nothing this
    // way, which is all these tests do to it; only an operating-system crash would.
    url_ = last_line(shell(pg_script() + " start " + dir_ + " " + std::to_string(port_) + " --non-durable"));
    started_ = true;
    {
        pqxx::connection conn(url_);
        db::Migrator{}.migrate(conn);
    }
    create_scripted_effect_table(url_);
}

OwnCluster::~OwnCluster() {
    if (!started_) {
        std::error_code ignored;
        std::filesystem::remove_all(dir_, ignored);
        return;
    }
    try {
        shell(pg_script() + " stop " + dir_);
    } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
    }
}

void OwnCluster::restart(const std::string& mode) const {
    // pg.sh's own rules: the newest installed server unless PG_BIN says otherwise, and the
    // postgres user when running as root.
    shell("set -e; bin=${PG_BIN:-/usr/lib/postgresql/15/bin}; "
          "[[ -x $bin/pg_ctl ]] || bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1); "
          "as=(); ((EUID == 0)) && as=(runuser -u postgres --); "
          "\"${as[@]}\" \"$bin/pg_ctl\" -D " + dir_ + "/data -l " + dir_ + "/log -m " + mode +
          " -w -t 60 restart >/dev/null");
}

int free_port() {
    const auto [code, out] = run_command({"/bin/bash", OUTBOX_SOURCE_DIR "/scripts/pg.sh", "free-port"}, {}, std::chrono::seconds{30});
    if (code != 0) throw std::runtime_error("no free port");
    return std::stoi(out);
}

SilentableProxy::SilentableProxy(int target_port, const std::filesystem::path& log)
    : port_(free_port()),
      process_(std::vector<std::string>{"/usr/bin/setsid", "/usr/bin/socat",
                                        "TCP-LISTEN:" + std::to_string(port_) + ",bind=127.0.0.1,reuseaddr,fork",
                                        "TCP:127.0.0.1:" + std::to_string(target_port)},
               {}, log.string()) {
    if (!wait_until([&] { return run_command({"/bin/bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/" + std::to_string(port_)},
                                             {}, std::chrono::seconds{5}).first == 0; },
                    std::chrono::seconds{10})) {
        throw std::runtime_error("socat did not start listening");
    }
}

SilentableProxy::~SilentableProxy() {
    ::kill(-process_.pid(), SIGCONT);
    ::kill(-process_.pid(), SIGKILL);
}

void SilentableProxy::freeze() const { ::kill(-process_.pid(), SIGSTOP); }
void SilentableProxy::thaw() const { ::kill(-process_.pid(), SIGCONT); }

std::string via_port(std::string url, int port) {
    const auto at = url.find("@127.0.0.1:");
    const auto slash = url.find('/', at + 11);
    return url.substr(0, at + 11) + std::to_string(port) + url.substr(slash);
}

int port_of(const std::string& url) {
    const auto at = url.find("@127.0.0.1:");
    return std::stoi(url.substr(at + 11, url.find('/', at + 11) - at - 11));
}

}  // namespace outbox::test::fault
