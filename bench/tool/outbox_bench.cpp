// outbox_bench: the timing-sensitive parts of bench/run.sh.
//
//   outbox_bench drain --url URL --type TYPE --n N [--aggregates A] [--timeout S] [--pid P]... [--postmaster P]
//       Inserts N events of TYPE in one transaction (with the NOTIFY outbox_publish would
//       send; with --aggregates, through outbox_publish() with aggregate keys: event i of
//       aggregate i mod A, so each aggregate's events must run one after another), then waits until none is PENDING, RETRY_WAIT or PROCESSING. Prints
//       "n=.. seconds=.. eps=.. cpu_host_s=.. cpu_pg_s=.. rss_kib=.." where seconds runs from
//       the insert's commit to the first poll (every 20 ms) that finds every event completed
//       and committed; CPU is what the --pid processes and
//       the PostgreSQL cluster (postmaster and its children) used in between; rss_kib is the
//       largest peak RSS (VmHWM) among the --pid processes. Exit 1 if some event did not
//       complete.
//   outbox_bench backlog --url URL --n N [--busy-sql SQL] [--claimed-sql SQL] [--timeout S] [--postmaster P]
//                        [--log FILE] -- COMMAND ARGS...
//       The N events are already waiting. Starts COMMAND (the worker, cold; output to FILE)
//       and polls every 10 ms until busy-sql (default: outboxd's unfinished events) answers
//       false; stops COMMAND with SIGTERM. Prints the drain line above (seconds from exec to
//       that poll; cpu_host_s is COMMAND's CPU from its start; wal_b the WAL written) and,
//       with claimed-sql (true once an event was claimed, polled every millisecond until
//       then), first_claim_ms: exec to the first claimed event.
//   outbox_bench publish --url URL --type TYPE --rate R --seconds S --commits FILE [--company C]
//       Publishes R events per second for S seconds through outbox_publish() (company C,
//       default bench), each in its
//       own autocommit statement, on a fixed schedule (a late publish does not shift the
//       ones after it); writes "<event_id> <commit returned, us since epoch>" per event.
//   outbox_bench stats --starts FILE --commits FILE [--skip K]
//       Joins the latency plugin's "<event_id> <occurred_at> <handler start>" lines with the
//       publisher's and prints, over all but the first K events published (the warm-up),
//       "n=.. p50_ms= p95_ms= p99_ms= max_ms=" from occurred_at (the publishing statement's
//       start) to handler start and "c50_ms= c95_ms= c99_ms=" from the commit's return.
//   outbox_bench cpu --postmaster P -- COMMAND ARGS...
//       Runs COMMAND and prints its output, then "cpu_cmd_s=.. cpu_pg_s=..".
//   outbox_bench report RESULTS
//       Prints the benchmark table from the records run.sh collected.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <pqxx/pqxx>

namespace {

using Clock = std::chrono::system_clock;
using Args = std::vector<std::string>;

struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

std::optional<std::string> option(const Args& args, const std::string& name) {
    for (std::size_t i = 0; i + 1 < args.size(); ++i) {
        if (args[i] == name) return args[i + 1];
    }
    return std::nullopt;
}

std::vector<std::string> options(const Args& args, const std::string& name) {
    std::vector<std::string> values;
    for (std::size_t i = 0; i + 1 < args.size(); ++i) {
        if (args[i] == name) values.push_back(args[i + 1]);
    }
    return values;
}

std::string required(const Args& args, const std::string& name) {
    auto value = option(args, name);
    if (!value) throw UsageError("missing " + name);
    return *value;
}

long long micros_since_epoch(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

// ---- /proc sampling -------------------------------------------------------------------

// utime + stime of one process (all its threads), in seconds; 0 when it is gone. With
// `reaped_children`, also what its children that already exited used (cutime + cstime).
double cpu_seconds(int pid, bool reaped_children = false) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string text;
    if (!std::getline(in, text)) return 0;
    // The command name (field 2) may contain spaces; fields after it start past the ')'.
    const auto close = text.rfind(')');
    if (close == std::string::npos) return 0;
    std::istringstream rest(text.substr(close + 2));
    std::string field;
    unsigned long long ticks = 0;
    for (int index = 3; rest >> field && index <= 17; ++index) {
        if (index == 14 || index == 15 || (reaped_children && (index == 16 || index == 17))) ticks += std::stoull(field);
    }
    return static_cast<double>(ticks) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

int parent_of(int pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string text;
    if (!std::getline(in, text)) return -1;
    const auto close = text.rfind(')');
    if (close == std::string::npos) return -1;
    std::istringstream rest(text.substr(close + 2));
    std::string state;
    int ppid = -1;
    rest >> state >> ppid;
    return ppid;
}

// The postmaster and every process it started (backends, checkpointer, WAL writer, ...),
// including backends that already exited (their time moved to the postmaster's children).
double cluster_cpu_seconds(int postmaster) {
    if (postmaster <= 0) return 0;
    double total = cpu_seconds(postmaster, true);
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
        const std::string name = entry.path().filename().string();
        if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
        const int pid = std::stoi(name);
        if (parent_of(pid) == postmaster) total += cpu_seconds(pid);
    }
    return total;
}

long peak_rss_kib(int pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
    }
    return 0;
}

std::string iso_millis(Clock::time_point t) {
    const std::time_t seconds = Clock::to_time_t(t);
    std::tm utc{};
    gmtime_r(&seconds, &utc);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
    const long long ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count() % 1000;
    char out[48];
    std::snprintf(out, sizeof out, "%s.%03lldZ", text, ms);
    return out;
}

std::string current_lsn(pqxx::connection& conn) {
    pqxx::nontransaction tx(conn);
    return tx.exec("SELECT pg_current_wal_lsn()::text")[0][0].c_str();
}

// WAL written by the whole cluster since `before` (every writer counts, as for CPU).
long long wal_bytes_since(pqxx::connection& conn, const std::string& before) {
    pqxx::nontransaction tx(conn);
    return tx.exec_params("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint", before)[0][0].as<long long>();
}

struct CpuSample {
    double host = 0;
    double pg = 0;
};

CpuSample sample_cpu(const std::vector<int>& pids, int postmaster) {
    CpuSample sample;
    for (int pid : pids) sample.host += cpu_seconds(pid);
    sample.pg = cluster_cpu_seconds(postmaster);
    return sample;
}

std::vector<int> to_ints(const std::vector<std::string>& texts) {
    std::vector<int> values;
    for (const auto& text : texts) values.push_back(std::stoi(text));
    return values;
}

// ---- drain ----------------------------------------------------------------------------

constexpr const char* kLoadSql = R"SQL(
INSERT INTO event_publication (company_id, event_type, payload)
SELECT 'bench', $1, jsonb_build_object('n', i) FROM generate_series(1, $2::int) AS i
)SQL";

// Keyed events take their aggregate position from outbox_publish(), the publishers' path.
constexpr const char* kLoadKeyedSql = R"SQL(
SELECT count(outbox_publish('bench', $1, jsonb_build_object('n', i), 'agg-' || (i % $3::int)))
FROM generate_series(1, $2::int) AS i
)SQL";

// Both halves read only a partial index (due rows, PROCESSING rows), so polling costs the
// database little however many rows are COMPLETED; seqscan is off on this connection so the
// planner never trades them for a scan of the whole table. Each poll is its own statement,
// so it sees exactly what was committed when it ran. Parked events (held back by an
// aggregate whose head waits for an operator) are not work a host can do: they do not count.
constexpr const char* kBusySql = R"SQL(
SELECT EXISTS (SELECT 1 FROM event_publication WHERE status IN ('PENDING', 'RETRY_WAIT') AND next_attempt_at < 'infinity')
    OR EXISTS (SELECT 1 FROM event_publication WHERE status = 'PROCESSING')
)SQL";

int drain(const Args& args) {
    const std::string url = required(args, "--url");
    const std::string type = required(args, "--type");
    const long n = std::stol(required(args, "--n"));
    const double timeout_s = std::stod(option(args, "--timeout").value_or("900"));
    const std::vector<int> pids = to_ints(options(args, "--pid"));
    const int postmaster = std::stoi(option(args, "--postmaster").value_or("0"));
    const int aggregates = std::stoi(option(args, "--aggregates").value_or("0"));

    pqxx::connection conn(url);
    {
        pqxx::nontransaction setup(conn);
        setup.exec("SET enable_seqscan = off");
    }
    const long long completed_before = [&] {
        pqxx::nontransaction tx(conn);
        return tx.exec("SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'")[0][0].as<long long>();
    }();

    {
        pqxx::work tx(conn);
        if (aggregates > 0) {
            tx.exec_params(kLoadKeyedSql, type, n, aggregates);
        } else {
            tx.exec_params(kLoadSql, type, n);
        }
        tx.exec_params("SELECT pg_notify('outboxd_events', $1)", type);
        tx.commit();
    }
    const auto committed = Clock::now();
    const CpuSample before = sample_cpu(pids, postmaster);
    const std::string lsn_before = current_lsn(conn);

    // The end is observed rather than read from completed_at: completed_at is the start of
    // the statement that stored the outcome, and that statement may take long.
    conn.prepare("busy", kBusySql);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    bool busy = true;
    auto drained = committed;
    while (busy && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        pqxx::nontransaction tx(conn);
        busy = tx.exec_prepared("busy")[0][0].as<bool>();
        drained = Clock::now();
    }
    const CpuSample after = sample_cpu(pids, postmaster);
    const long long wal = wal_bytes_since(conn, lsn_before);
    long rss = 0;
    for (int pid : pids) rss = std::max(rss, peak_rss_kib(pid));

    pqxx::nontransaction tx(conn);
    const auto counts = tx.exec("SELECT status, count(*) FROM event_publication GROUP BY status ORDER BY status");
    long long completed = 0;
    std::string summary;
    for (const auto& row : counts) {
        summary += std::string(summary.empty() ? "" : ", ") + row[0].c_str() + " " + row[1].c_str();
        if (std::string(row[0].c_str()) == "COMPLETED") completed = row[1].as<long long>();
    }
    if (busy || completed - completed_before != n) {
        std::cerr << "outbox_bench drain: expected " << n << " newly COMPLETED events"
                  << (busy ? " before the timeout" : "") << "; table: " << summary << "\n";
        return 1;
    }
    const double seconds = std::chrono::duration<double>(drained - committed).count();
    std::printf("n=%ld seconds=%.3f eps=%.0f cpu_host_s=%.2f cpu_pg_s=%.2f rss_kib=%ld wal_b=%lld\n", n, seconds,
                static_cast<double>(n) / seconds, after.host - before.host, after.pg - before.pg, rss, wal);
    return 0;
}

// ---- backlog --------------------------------------------------------------------------

// The events are already waiting (run.sh loaded them); the worker process starts cold.
// Polled on one connection with seqscan off, so a poll reads a partial index or stops at
// the first live row and costs the database little.
int backlog(const Args& args) {
    const auto dashes = std::find(args.begin(), args.end(), "--");
    if (dashes == args.end() || dashes + 1 == args.end()) throw UsageError("backlog needs -- COMMAND");
    const Args own(args.begin(), dashes);
    const std::string url = required(own, "--url");
    const long n = std::stol(required(own, "--n"));
    const std::string busy_sql = option(own, "--busy-sql").value_or(kBusySql);
    const std::optional<std::string> claimed_sql = option(own, "--claimed-sql");
    const double timeout_s = std::stod(option(own, "--timeout").value_or("900"));
    const int postmaster = std::stoi(option(own, "--postmaster").value_or("0"));
    const std::string log_path = option(own, "--log").value_or("/dev/null");
    std::vector<char*> argv;
    for (auto it = dashes + 1; it != args.end(); ++it) argv.push_back(const_cast<char*>(it->c_str()));
    argv.push_back(nullptr);

    pqxx::connection conn(url);
    {
        pqxx::nontransaction setup(conn);
        setup.exec("SET enable_seqscan = off");
    }
    conn.prepare("busy", busy_sql);
    if (claimed_sql) conn.prepare("claimed", *claimed_sql);
    const std::string lsn_before = current_lsn(conn);
    const double pg_before = cluster_cpu_seconds(postmaster);

    const auto exec_at = std::chrono::steady_clock::now();
    const auto exec_wall = Clock::now();
    const pid_t child = fork();
    if (child < 0) throw std::runtime_error("fork failed");
    if (child == 0) {
        std::FILE* out = std::freopen(log_path.c_str(), "a", stdout);
        if (out != nullptr) dup2(fileno(stdout), STDERR_FILENO);
        // In the worker's log, so its own start-up lines can be read against it.
        std::printf("outbox_bench backlog: exec at %s\n", iso_millis(exec_wall).c_str());
        std::fflush(stdout);
        execvp(argv[0], argv.data());
        std::perror("outbox_bench backlog: exec");
        _exit(127);
    }
    // Until the first event is claimed the poll runs every millisecond (that figure is the
    // start-up time); from then on every 10 ms.
    const auto deadline = exec_at + std::chrono::duration<double>(timeout_s);
    std::optional<double> first_claim_ms;
    bool busy = true;
    auto drained = exec_at;
    int status = 0;
    bool exited = false;
    while (busy && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(claimed_sql && !first_claim_ms ? 1 : 10));
        if (waitpid(child, &status, WNOHANG) == child) {
            exited = true;
            break;
        }
        pqxx::nontransaction tx(conn);
        if (claimed_sql && !first_claim_ms && tx.exec_prepared("claimed")[0][0].as<bool>()) {
            first_claim_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - exec_at).count();
        }
        busy = tx.exec_prepared("busy")[0][0].as<bool>();
        drained = std::chrono::steady_clock::now();
    }
    const double pg_after = cluster_cpu_seconds(postmaster);
    const double worker_cpu = exited ? 0 : cpu_seconds(child);
    const long rss = exited ? 0 : peak_rss_kib(child);
    const long long wal = wal_bytes_since(conn, lsn_before);
    if (!exited) {
        kill(child, SIGTERM);
        waitpid(child, &status, 0);
    }
    if (busy) {
        std::cerr << "outbox_bench backlog: the queue was not drained"
                  << (exited ? " (the worker exited early; see its log)" : " before the timeout") << "\n";
        return 1;
    }
    const double seconds = std::chrono::duration<double>(drained - exec_at).count();
    std::printf("n=%ld seconds=%.3f eps=%.0f cpu_host_s=%.2f cpu_pg_s=%.2f rss_kib=%ld wal_b=%lld", n, seconds,
                static_cast<double>(n) / seconds, worker_cpu, pg_after - pg_before, rss, wal);
    if (first_claim_ms) std::printf(" first_claim_ms=%.1f", *first_claim_ms);
    std::printf("\n");
    return 0;
}

// ---- publish --------------------------------------------------------------------------

int publish(const Args& args) {
    const std::string url = required(args, "--url");
    const std::string type = required(args, "--type");
    const double rate = std::stod(required(args, "--rate"));
    const double seconds = std::stod(required(args, "--seconds"));
    std::ofstream commits(required(args, "--commits"));
    pqxx::connection conn(url);
    const std::string company = option(args, "--company").value_or("bench");
    conn.prepare("publish", "SELECT outbox_publish($2, $1, '{}'::jsonb)::text");
    const long total = std::lround(rate * seconds);
    const auto start = std::chrono::steady_clock::now();
    for (long i = 0; i < total; ++i) {
        const auto at = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                    std::chrono::duration<double>(static_cast<double>(i) / rate));
        std::this_thread::sleep_until(at);
        pqxx::nontransaction tx(conn);
        const std::string id = tx.exec_prepared("publish", type, company)[0][0].c_str();
        commits << id << ' ' << micros_since_epoch(Clock::now()) << '\n';
    }
    std::printf("published=%ld\n", total);
    return 0;
}

// ---- stats ----------------------------------------------------------------------------

double percentile(const std::vector<double>& sorted, double p) {
    if (sorted.empty()) return NAN;
    // Nearest rank: the smallest value with at least p% of the samples at or below it.
    const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
    return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}

int stats(const Args& args) {
    const long skip = std::stol(option(args, "--skip").value_or("0"));
    std::map<std::string, long long> committed;
    {
        const std::string path = required(args, "--commits");
        std::ifstream in(path);
        if (!in) throw std::runtime_error("cannot read " + path);
        std::string id;
        long long at = 0;
        while (in >> id >> at) committed[id] = at;
    }
    struct Sample {
        long long occurred, started, committed;
    };
    std::vector<Sample> samples;
    {
        const std::string path = required(args, "--starts");
        std::ifstream in(path);
        if (!in) throw std::runtime_error("cannot read " + path);
        std::string id;
        long long occurred = 0, started = 0;
        while (in >> id >> occurred >> started) {
            const auto it = committed.find(id);
            if (it != committed.end()) samples.push_back({occurred, started, it->second});
        }
    }
    if (samples.size() < committed.size()) {
        std::cerr << "outbox_bench stats: " << committed.size() - samples.size() << " of " << committed.size()
                  << " published events have no handler start\n";
    }
    std::sort(samples.begin(), samples.end(), [](const Sample& a, const Sample& b) { return a.occurred < b.occurred; });
    std::vector<double> from_publish, from_commit;
    for (std::size_t i = static_cast<std::size_t>(std::max(0L, skip)); i < samples.size(); ++i) {
        from_publish.push_back(static_cast<double>(samples[i].started - samples[i].occurred) / 1000.0);
        from_commit.push_back(static_cast<double>(samples[i].started - samples[i].committed) / 1000.0);
    }
    std::sort(from_publish.begin(), from_publish.end());
    std::sort(from_commit.begin(), from_commit.end());
    std::printf("n=%zu p50_ms=%.2f p95_ms=%.2f p99_ms=%.2f max_ms=%.2f c50_ms=%.2f c95_ms=%.2f c99_ms=%.2f\n",
                from_publish.size(), percentile(from_publish, 50), percentile(from_publish, 95),
                percentile(from_publish, 99), from_publish.empty() ? NAN : from_publish.back(),
                percentile(from_commit, 50), percentile(from_commit, 95), percentile(from_commit, 99));
    return from_publish.empty() || samples.size() < committed.size() ? 1 : 0;
}

// ---- cpu ------------------------------------------------------------------------------

int cpu(const Args& args) {
    const auto dashes = std::find(args.begin(), args.end(), "--");
    if (dashes == args.end() || dashes + 1 == args.end()) throw UsageError("cpu needs -- COMMAND");
    const int postmaster = std::stoi(option(Args(args.begin(), dashes), "--postmaster").value_or("0"));
    std::vector<char*> argv;
    for (auto it = dashes + 1; it != args.end(); ++it) argv.push_back(const_cast<char*>(it->c_str()));
    argv.push_back(nullptr);

    const double pg_before = cluster_cpu_seconds(postmaster);
    const pid_t child = fork();
    if (child < 0) throw std::runtime_error("fork failed");
    if (child == 0) {
        execvp(argv[0], argv.data());
        std::perror("outbox_bench cpu: exec");
        _exit(127);
    }
    int status = 0;
    rusage usage{};
    wait4(child, &status, 0, &usage);
    const double pg_after = cluster_cpu_seconds(postmaster);
    const double own = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                       static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
    std::fflush(stdout);
    std::printf("cpu_cmd_s=%.2f cpu_pg_s=%.2f\n", own, pg_after - pg_before);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

// ---- report ---------------------------------------------------------------------------

// One record per line, tab-separated: kind, key, description, then "name=value" fields
// separated by spaces. kind is "tp" (one throughput run), "lat" (one latency run),
// "plan" or "note" (free text printed as is), "meta" (N, runs, ...).
struct Record {
    std::string kind, key, description;
    std::map<std::string, double> values;
    std::string text;
};

std::vector<Record> read_records(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read " + path);
    std::vector<Record> records;
    std::string line;
    while (std::getline(in, line)) {
        std::vector<std::string> columns;
        std::stringstream split(line);
        std::string column;
        while (std::getline(split, column, '\t')) columns.push_back(column);
        if (columns.size() < 3) continue;
        Record record{columns[0], columns[1], columns[2], {}, columns.size() > 3 ? columns[3] : ""};
        std::istringstream fields(record.text);
        std::string field;
        while (fields >> field) {
            const auto eq = field.find('=');
            if (eq == std::string::npos) continue;
            try {
                record.values[field.substr(0, eq)] = std::stod(field.substr(eq + 1));
            } catch (const std::exception&) {
                // a text field (kept in record.text)
            }
        }
        records.push_back(std::move(record));
    }
    return records;
}

struct Series {
    std::string key, description;
    std::vector<double> eps, rss_kib, cpu_host, cpu_pg, n, wal_b, first_claim_ms;
    std::vector<double> p50, p95, p99, c50, c95, c99;
};

double median(std::vector<double> values) {
    if (values.empty()) return NAN;
    std::sort(values.begin(), values.end());
    const std::size_t mid = values.size() / 2;
    return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

// Concatenates by appending (GCC 12 warns falsely about prepending into a temporary).
template <class... Parts>
std::string cat(const Parts&... parts) {
    std::string text;
    (text.append(parts), ...);
    return text;
}

std::string thousands(double value) {
    if (std::isnan(value)) return "-";
    const long long rounded = std::llround(value);
    const std::string digits = std::to_string(std::llabs(rounded));
    std::string text = rounded < 0 ? "-" : "";
    for (std::size_t i = 0; i < digits.size(); ++i) {
        if (i > 0 && (digits.size() - i) % 3 == 0) text.push_back(',');
        text.push_back(digits[i]);
    }
    return text;
}

std::string fixed(double value, int decimals) {
    if (std::isnan(value)) return "-";
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
    return buffer;
}

std::string mib(double kib) { return std::isnan(kib) || kib <= 0 ? "-" : fixed(kib / 1024.0, 1) + " MiB"; }

std::string pad(const std::string& text, std::size_t width) {
    // Width in characters, not bytes (descriptions contain "×" and "–").
    std::size_t chars = 0;
    for (unsigned char c : text) chars += (c & 0xC0) != 0x80;
    return text + std::string(width > chars ? width - chars : 1, ' ');
}

int report(const Args& args) {
    if (args.empty()) throw UsageError("report needs the results file");
    const auto records = read_records(args[0]);
    std::vector<Series> throughput, latency;
    std::map<std::string, std::string> meta;
    std::vector<std::string> notes;
    const auto series_for = [](std::vector<Series>& list, const Record& record) -> Series& {
        for (auto& series : list) {
            if (series.key == record.key) return series;
        }
        list.push_back(Series{record.key, record.description, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}});
        return list.back();
    };
    const auto value = [](const Record& record, const std::string& name) {
        const auto it = record.values.find(name);
        return it == record.values.end() ? NAN : it->second;
    };
    for (const auto& record : records) {
        if (record.kind == "tp") {
            auto& series = series_for(throughput, record);
            series.eps.push_back(value(record, "eps"));
            series.rss_kib.push_back(value(record, "rss_kib"));
            series.cpu_host.push_back(value(record, "cpu_host_s"));
            series.cpu_pg.push_back(value(record, "cpu_pg_s"));
            series.n.push_back(value(record, "n"));
            if (!std::isnan(value(record, "wal_b"))) series.wal_b.push_back(value(record, "wal_b"));
            if (!std::isnan(value(record, "first_claim_ms"))) series.first_claim_ms.push_back(value(record, "first_claim_ms"));
        } else if (record.kind == "lat") {
            auto& series = series_for(latency, record);
            series.p50.push_back(value(record, "p50_ms"));
            series.p95.push_back(value(record, "p95_ms"));
            series.p99.push_back(value(record, "p99_ms"));
            series.c50.push_back(value(record, "c50_ms"));
            series.c95.push_back(value(record, "c95_ms"));
            series.c99.push_back(value(record, "c99_ms"));
            series.rss_kib.push_back(value(record, "rss_kib"));
        } else if (record.kind == "meta") {
            meta[record.key] = record.description;
        } else if (record.kind == "note") {
            notes.push_back(record.description);
        }
    }
    const auto find = [](const std::vector<Series>& list, const std::string& key) -> const Series* {
        for (const auto& series : list) {
            if (series.key == key) return &series;
        }
        return nullptr;
    };
    const auto eps_of = [&](const std::string& key) {
        const Series* series = find(throughput, key);
        return series ? median(series->eps) : NAN;
    };

    std::printf("outboxd benchmark — %s\n", meta.count("title") ? meta["title"].c_str() : "");
    for (const auto& [name, text] : meta) {
        if (name != "title") std::printf("%s\n", text.c_str());
    }
    const auto peak = [](const std::vector<double>& values) {
        return values.empty() ? NAN : *std::max_element(values.begin(), values.end());
    };
    // Markdown, so the tables paste into docs/performance.md as they are.
    const auto per_event_us = [](const std::vector<double>& seconds, long long n) {
        return n > 0 ? median(seconds) * 1e6 / static_cast<double>(n) : NAN;
    };
    const auto throughput_table = [&](const std::string& title, bool backlog) {
        bool any = false;
        for (const auto& series : throughput) any = any || ((series.key.rfind("backlog-", 0) == 0) == backlog);
        if (!any) return;
        std::printf("\n**%s**\n\n| %s | runs | events/s median (min–max) | PostgreSQL CPU µs/event | WAL B/event | "
                    "worker CPU µs/event | peak RSS |%s\n|---|---|---|---|---|---|---|%s\n",
                    title.c_str(), backlog ? "Backlog: N events waiting, worker started cold" : "Burst: N events due in one commit",
                    backlog ? " exec → first claim |" : "", backlog ? "---|" : "");
        for (const auto& series : throughput) {
            if ((series.key.rfind("backlog-", 0) == 0) != backlog) continue;
            const auto [lo, hi] = std::minmax_element(series.eps.begin(), series.eps.end());
            const long long n = std::llround(median(series.n));
            std::printf("| %s | %zu | %s (%s–%s) | %s | %s | %s | %s |", series.description.c_str(), series.eps.size(),
                        thousands(median(series.eps)).c_str(), thousands(*lo).c_str(), thousands(*hi).c_str(),
                        fixed(per_event_us(series.cpu_pg, n), 1).c_str(),
                        thousands(n > 0 ? median(series.wal_b) / static_cast<double>(n) : NAN).c_str(),
                        fixed(per_event_us(series.cpu_host, n), 1).c_str(), mib(peak(series.rss_kib)).c_str());
            if (backlog) {
                const double first = median(series.first_claim_ms);
                std::printf(" %s |", std::isnan(first) ? "-" : (fixed(first, 0) + " ms").c_str());
            }
            std::printf("\n");
        }
    };
    throughput_table("Burst: workers running and idle, N events become due in one commit; clock from that commit "
                     "to the first poll (20 ms) that finds them all finished",
                     false);
    throughput_table("Backlog: N events already waiting, worker process started cold; clock from exec to the first "
                     "poll (10 ms) that finds the queue drained",
                     true);
    if (!latency.empty()) {
        std::printf("\n%s%s%s%s%s\n", pad("Latency to handler start, ms (median of runs)", 64).c_str(), pad("runs", 6).c_str(),
                    pad("from publish: p50 / p95 / p99", 32).c_str(), pad("from commit: p50 / p95 / p99", 31).c_str(),
                    "peak RSS");
        const auto triple = [](const std::vector<double>& a, const std::vector<double>& b, const std::vector<double>& c) {
            return cat(fixed(median(a), 2), " / ", fixed(median(b), 2), " / ", fixed(median(c), 2));
        };
        for (const auto& series : latency) {
            std::printf("%s%s%s%s%s\n", pad(series.description, 64).c_str(), pad(std::to_string(series.p50.size()), 6).c_str(),
                        pad(triple(series.p50, series.p95, series.p99), 32).c_str(),
                        pad(triple(series.c50, series.c95, series.c99), 31).c_str(), mib(peak(series.rss_kib)).c_str());
        }
    }

    // Ratios: every outboxd figure against every peer figure of the same kind.
    std::vector<const Series*> ours_lat, peers_lat;
    const auto ratio_table = [&](const std::string& prefix, const std::string& title) {
        std::vector<const Series*> ours, peers;
        for (const auto& series : throughput) {
            const std::string& key = series.key;
            const bool backlog = key.rfind("backlog-", 0) == 0;
            if ((prefix == "backlog-") != backlog) continue;
            if (key.rfind(prefix + "outboxd-", 0) == 0) ours.push_back(&series);
            else if (key.rfind("hosts-", 0) != 0 && key.rfind("growth-", 0) != 0 && key.rfind("pgbouncer-", 0) != 0 &&
                     key.find("pgbench-write") == std::string::npos)
                peers.push_back(&series);
        }
        if (ours.empty() || peers.empty()) return;
        std::printf("\n**%s: outboxd events/s ÷ peer events/s (medians)**\n\n|   |", title.c_str());
        for (const auto* peer : peers) std::printf(" %s |", peer->key.c_str());
        std::printf("\n|---|");
        for (std::size_t i = 0; i < peers.size(); ++i) std::printf("---|");
        std::printf("\n");
        for (const auto* mine : ours) {
            std::printf("| %s |", mine->key.c_str());
            for (const auto* peer : peers) std::printf(" %s× |", fixed(median(mine->eps) / median(peer->eps), 2).c_str());
            std::printf("\n");
        }
    };
    ratio_table("", "Burst ratio");
    ratio_table("backlog-", "Backlog ratio");
    for (const auto& series : latency) (series.key.rfind("outboxd-", 0) == 0 ? ours_lat : peers_lat).push_back(&series);
    if (!ours_lat.empty() && !peers_lat.empty()) {
        std::printf("\nLatency ratio: outboxd ÷ peer (p50 / p99; below 1 means outboxd starts sooner)\n%s",
                    pad("", 24).c_str());
        for (const auto* peer : peers_lat) std::printf("%s", pad(peer->key, 20).c_str());
        std::printf("\n");
        for (const auto* ours : ours_lat) {
            std::printf("%s", pad(ours->key, 24).c_str());
            for (const auto* peer : peers_lat) {
                std::printf("%s", pad(fixed(median(ours->p50) / median(peer->p50), 2) + " / " +
                                          fixed(median(ours->p99) / median(peer->p99), 2),
                                      20)
                                      .c_str());
            }
            std::printf("\n");
        }
    }

    // Targets from the issue: goals to read, not assertions.
    std::printf("\nTargets (goals, not assertions)\n");
    const auto target = [](const std::string& what, double got, const std::string& shown, bool met) {
        std::printf("  %s%s%s\n", pad(what, 62).c_str(), pad(shown, 22).c_str(),
                    std::isnan(got) ? "not measured" : (met ? "met" : "MISSED"));
    };
    const double tuned = eps_of("outboxd-tuned");
    const double best_noop = std::max(tuned, eps_of("outboxd-default"));
    const double graphile_best = eps_of("graphile-best");
    const double graphile_default = eps_of("graphile-default");
    double ceiling = NAN;
    for (const auto& series : throughput) {
        if (series.key.rfind("pgbench-claim100", 0) == 0) ceiling = std::isnan(ceiling) ? median(series.eps) : std::max(ceiling, median(series.eps));
    }
    const double write = eps_of("outboxd-write-pool");
    target("no-op handler ≥ 30,000 events/s (best outboxd setting)", best_noop, thousands(best_noop), best_noop >= 30000);
    target("no-op ≥ 1.5× graphile-worker best", best_noop / graphile_best, fixed(best_noop / graphile_best, 2) + "×",
           best_noop / graphile_best >= 1.5);
    target("no-op ≥ 70% of the raw claim+complete ceiling", best_noop / ceiling,
           fixed(100 * best_noop / ceiling, 0) + "% of " + thousands(ceiling), best_noop / ceiling >= 0.7);
    const double defaults_ratio = eps_of("outboxd-default") / graphile_default;
    target("defaults ≥ 5× graphile-worker defaults", defaults_ratio, fixed(defaults_ratio, 2) + "×", defaults_ratio >= 5);
    target("db-write handler ≥ 8,000 events/s (defaults + pool_size)", write, thousands(write), write >= 8000);
    const auto us_per_event = [&](const std::string& key) {
        const Series* series = find(throughput, key);
        return series ? median(series->cpu_pg) * 1e6 / median(series->n) : NAN;
    };
    const double write_us = us_per_event("outboxd-write-pool");
    target("db-write handler: PostgreSQL CPU ≤ 150 µs/event", write_us, fixed(write_us, 1) + " µs", write_us <= 150);
    const double write_ceiling = eps_of("pgbench-write");
    target("db-write handler ≥ 80% of pgbench running its statements", write / write_ceiling,
           fixed(100 * write / write_ceiling, 0) + "% of " + thousands(write_ceiling), write / write_ceiling >= 0.8);
    for (const std::string& key : {std::string("outboxd-tuned"), std::string("backlog-outboxd-tuned")}) {
        const double us = us_per_event(key);
        target("no-op PostgreSQL CPU ≤ 18 µs/event: " + key, us, fixed(us, 1) + " µs", us <= 18);
    }
    const double backlog_ratio = eps_of("backlog-outboxd-tuned") / eps_of("backlog-graphile-best");
    target("backlog: no-op tuned ≥ 1.5× graphile-worker best", backlog_ratio, fixed(backlog_ratio, 2) + "×",
           backlog_ratio >= 1.5);
    if (const Series* first = find(throughput, "backlog-outboxd-tuned"); first && !first->first_claim_ms.empty()) {
        const double ms = median(first->first_claim_ms);
        target("backlog: exec → first claimed event ≤ 100 ms (one plugin)", ms, fixed(ms, 0) + " ms", ms <= 100);
    }
    const double keyed = eps_of("outboxd-keyed") / tuned;
    target("keyed (N/10 aggregates, in order) ≥ 80% of unkeyed tuned", keyed, fixed(100 * keyed, 0) + "%",
           keyed >= 0.8);
    if (const Series* lat = find(latency, "outboxd-default")) {
        const double p50 = median(lat->p50), p99 = median(lat->p99);
        target("latency at 50 events/s: p50 ≤ 4 ms, p99 ≤ 8 ms", p50, fixed(p50, 2) + " / " + fixed(p99, 2) + " ms",
               p50 <= 4 && p99 <= 8);
    } else {
        target("latency at 50 events/s: p50 ≤ 4 ms, p99 ≤ 8 ms", NAN, "-", false);
    }
    double rss = NAN;
    for (const auto& series : throughput) {
        if (series.key.rfind("outboxd-", 0) == 0) {
            const double highest = peak(series.rss_kib);
            rss = std::isnan(rss) ? highest : std::max(rss, highest);
        }
    }
    target("outboxd peak RSS ≤ 64 MiB", rss, mib(rss), rss <= 64 * 1024);
    const double growth = eps_of("growth-filled"), empty = eps_of("growth-empty");
    if (!std::isnan(growth)) {
        target("growth: 1.1M old rows within 10% of the empty table", growth / empty,
               cat(fixed(100 * growth / empty, 0), "% of ", thousands(empty)), growth / empty >= 0.9);
    }
    if (!std::isnan(eps_of("hosts-1"))) {
        const double one = eps_of("hosts-1"), two = eps_of("hosts-2"), four = eps_of("hosts-4");
        const bool holds = (std::isnan(two) || two >= one * 0.95) && (std::isnan(four) || four >= std::max(one, two) * 0.95);
        target("1 → 2 → 4 hosts: aggregate does not fall (5% noise allowed)", one,
               thousands(one) + " → " + thousands(two) + " → " + thousands(four), holds);
    }
    for (const auto& note : notes) std::printf("\n%s", note.c_str());
    if (!notes.empty()) std::printf("\n");
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::cerr << "usage: outbox_bench drain|publish|stats|cpu|report ... (see the top of outbox_bench.cpp)\n";
        return 2;
    }
    const std::string command = argv[1];
    const Args args(argv + 2, argv + argc);
    try {
        if (command == "drain") return drain(args);
        if (command == "backlog") return backlog(args);
        if (command == "publish") return publish(args);
        if (command == "stats") return stats(args);
        if (command == "cpu") return cpu(args);
        if (command == "report") return report(args);
        throw UsageError("unknown command " + command);
    } catch (const UsageError& e) {
        std::cerr << "outbox_bench: " << e.what() << "\n";
        return 2;
    } catch (const std::exception& e) {
        std::cerr << "outbox_bench " << command << ": " << e.what() << "\n";
        return 1;
    }
}
