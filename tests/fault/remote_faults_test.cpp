// The sample plugins against the example remote services run as processes of their own,
// misbehaving: slow answers near the plugin's timeout, stalls past it, connections dropped
// after the work was done, answers sent after the client gave up, and the service itself
// killed (connections reset, then refused) or frozen (every call in flight times out and
// is processed after the client left). The final effects still happen exactly once.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <regex>
#include <set>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <signal.h>

#include "fault/fault_fixture.hpp"
#include "support/pg_fixture.hpp"
#include "support/test_host.hpp"

namespace outbox::test::fault {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr const char* kApiKey = "fault-tier-classifier-key";

// Codes the sample plugins and the runtime document for retryable failures.
const std::set<std::string> kDocumentedRetryCodes{"HTTP_409", "HTTP_429",       "HTTP_500",        "HTTP_503",
                                                  "TIMEOUT",  "CONNECT_FAILED", "CONNECTION_LOST", "WORKER_LOST"};

// The sample plugins and example services are built next to outboxd in the same tree.
std::string built(const std::string& relative) {
    const fs::path path = fs::path(OUTBOXD_BINARY).parent_path().parent_path() / relative;
    if (!fs::exists(path)) {
        throw std::runtime_error(path.string() + " is not built; the remote-fault cases need the sample plugins and "
                                                 "example services (OUTBOX_BUILD_PLUGINS=ON and a full build)");
    }
    return path.string();
}

// An example service program on 127.0.0.1, restartable on the same port with other flags.
class Service {
public:
    Service(std::string program, const fs::path& log) : program_(std::move(program)), log_(log.string()) {}

    void start(const std::vector<std::string>& flags) {
        std::vector<std::string> argv{program_, "--port", std::to_string(port_)};
        argv.insert(argv.end(), flags.begin(), flags.end());
        const std::size_t before = read_file(log_).size();
        process_ = std::make_unique<ChildProcess>(argv, std::map<std::string, std::string>{{"AI_API_KEY", kApiKey}}, log_);
        const std::regex listening("listening on http://127\\.0\\.0\\.1:([0-9]+)");
        std::string port;
        const bool up = wait_until(
            [&] {
                const std::string text = read_file(log_).substr(before);
                std::smatch match;
                if (!std::regex_search(text, match, listening)) return false;
                port = match[1].str();
                return true;
            },
            20s);
        if (!up) throw std::runtime_error(program_ + " did not start:\n" + read_file(log_));
        port_ = std::stoi(port);
    }
    void kill() {
        process_->signal(SIGKILL);
        process_->wait(10s);
    }
    void signal(int sig) const { process_->signal(sig); }
    [[nodiscard]] int port() const { return port_; }
    [[nodiscard]] std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_); }

private:
    std::string program_;
    std::string log_;
    int port_ = 0;  // 0 until the first start picked one
    std::unique_ptr<ChildProcess> process_;
};

const std::map<std::string, std::string> kHostEnv{{"OUTBOX_LEASE_DURATION", "2s"},
                                                  {"OUTBOX_POLL_INTERVAL", "200ms"},
                                                  {"OUTBOX_INITIAL_BACKOFF", "100ms"},
                                                  {"OUTBOX_MAX_BACKOFF", "1s"},
                                                  {"OUTBOX_MAX_ATTEMPTS", "30"},
                                                  {"OUTBOX_CONCURRENCY", "8"},
                                                  {"OUTBOX_SHUTDOWN_TIMEOUT", "5s"},
                                                  {"AI_API_KEY", kApiKey}};

// Waits for every event to settle, noting any PROCESSING row left past its lease.
void settle(const std::string& url, long long& max_stuck, std::chrono::seconds timeout) {
    ASSERT_TRUE(wait_until(
        [&] {
            max_stuck = std::max(max_stuck, stuck_processing(url, 5s));
            return unsettled(url) == 0;
        },
        timeout))
        << status_summary(url);
}

long long completed(const std::string& url) {
    return count(url, "SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'");
}

// Two hosts work through `events`; once a quarter of them completed, with work still left,
// `fault` strikes. Then every event must settle with nothing left PROCESSING past its
// lease, and both hosts must stop cleanly. `logs` receives both hosts' logs.
void run_two_hosts_with_a_fault_mid_run(const Fleet& fleet, const std::string& url, int events,
                                        const std::function<void()>& fault, std::string& logs) {
    auto first = fleet.start("host-1");
    auto second = fleet.start("host-2");
    ASSERT_TRUE(wait_until([&] { return completed(url) >= events / 4; }, 60s)) << status_summary(url);
    ASSERT_GT(unsettled(url), 0) << "the fault must strike mid-run";
    fault();
    long long max_stuck = 0;
    settle(url, max_stuck, 120s);
    logs = fleet.log("host-1") + fleet.log("host-2");
    stop_cleanly(fleet, *first, "host-1");
    stop_cleanly(fleet, *second, "host-2");
    EXPECT_EQ(max_stuck, 0);
}

TEST(RemoteFaults, ClassifierKilledMidRunUnderStallsAndLostAnswersClassifiesEachWebsiteOnce) {
    constexpr int kWebsites = 400;
    TestDatabase db;
    const std::string& url = db.url();
    db.exec(read_file(std::string(OUTBOX_SOURCE_DIR) + "/examples/schema.sql"));
    // Every change of a category, to prove none is set twice or overwritten.
    db.exec("CREATE TABLE category_change (website_id uuid, old_category text, new_category text);"
            "CREATE FUNCTION record_category_change() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "INSERT INTO category_change VALUES (NEW.id, OLD.category, NEW.category); RETURN NEW; END $$;"
            "CREATE TRIGGER website_category_change AFTER UPDATE ON website FOR EACH ROW "
            "WHEN (OLD.category IS DISTINCT FROM NEW.category) EXECUTE FUNCTION record_category_change();");
    db.exec("WITH w AS (INSERT INTO website (domain) SELECT 'site-' || g || '.example.com' FROM generate_series(1, " +
            std::to_string(kWebsites) + ") g RETURNING id, domain) "
            "SELECT outbox_publish('acme', 'WebsiteRegistered', jsonb_build_object('website_id', id, 'domain', domain), "
            "NULL, id::text) FROM w");

    TempDir dir;
    // Answers take up to 0.8s of the plugin's 1s timeout; 5% stall past it, 5% are
    // classified but answered too late, 5% classified but the connection is dropped.
    const std::vector<std::string> faults{"--latency-ms",     "1-800", "--rate-timeout", "0.05",
                                          "--rate-lost-late", "0.05",  "--rate-lost-drop", "0.05",
                                          "--rate-503",       "0.03",  "--retry-after",    "1",
                                          "--stall-ms",       "1500"};
    Service classifier(built("examples/ai-classifier"), dir.path() / "classifier.log");
    classifier.start(faults);
    const Fleet fleet(url, kHostEnv, {built("plugins/category-classification/libcategory_classification.so")},
                      "  category-classification:\n"
                      "    timeout: 5s\n"
                      "    config:\n"
                      "      endpoint: " + classifier.base_url() + "/v1/classify\n"
                      "      api_key_env: AI_API_KEY\n"
                      "      timeout: 1s\n");
    std::string logs;
    ASSERT_NO_FATAL_FAILURE(run_two_hosts_with_a_fault_mid_run(
        fleet, url, kWebsites,
        [&] {
            classifier.kill();  // calls in flight are reset, new ones refused
            std::this_thread::sleep_for(3s);
            classifier.start(faults);
        },
        logs));
    expect_final_invariants(url, kDocumentedRetryCodes, std::nullopt, "category-classification");
    EXPECT_EQ(completed(url), kWebsites) << status_summary(url);
    EXPECT_EQ(count(url, "SELECT count(*) FROM category_change"), kWebsites) << "each website's category set once";
    EXPECT_EQ(count(url, "SELECT count(*) FROM category_change WHERE old_category IS NOT NULL"), 0) << "never overwritten";
    for (const char* code : {"code=TIMEOUT", "code=CONNECTION_LOST", "code=CONNECT_FAILED"}) {
        EXPECT_GT(count_lines(logs, code), 0) << "the " << code << " fault really happened";
    }

    // The stored category is the classifier's answer, asked again of a well-behaved one.
    classifier.kill();
    classifier.start({});
    httplib::Client client("127.0.0.1", classifier.port());
    for (const auto& row : db.exec("SELECT domain, category FROM website")) {
        const auto answer = client.Post("/v1/classify", {{"Authorization", std::string("Bearer ") + kApiKey}},
                                        nlohmann::json{{"domain", row[0].as<std::string>()}}.dump(), "application/json");
        ASSERT_TRUE(answer && answer->status == 200) << row[0].as<std::string>();
        EXPECT_EQ(nlohmann::json::parse(answer->body).at("category").get<std::string>(), row[1].as<std::string>())
            << row[0].as<std::string>();
    }
}

TEST(RemoteFaults, AdminFrozenMidRunUnderSlowAndLostAnswersCountsEachMissionOnce) {
    constexpr int kMissions = 600;
    TestDatabase db;
    const std::string& url = db.url();
    db.exec("SELECT outbox_publish('acme', 'MissionCompleted', jsonb_build_object('completion_id', gen_random_uuid(), "
            "'user_id', 'user-' || (g % 25), 'mission_id', 'mission-' || g, 'solar_term', 'SUMMER_SOLSTICE')) "
            "FROM generate_series(1, " + std::to_string(kMissions) + ") g");

    TempDir dir;
    Service admin(built("examples/admin-stats-server"), dir.path() / "admin.log");
    admin.start({"--latency-ms", "1-700", "--rate-timeout", "0.04", "--rate-lost-late", "0.04", "--rate-lost-drop",
                 "0.04", "--rate-409", "0.03", "--stall-ms", "1500", "--seed", "3"});
    const Fleet fleet(url, kHostEnv, {built("plugins/mission-log-forwarding/libmission_log_forwarding.so")},
                      "  mission-log-forwarding:\n"
                      "    timeout: 5s\n"
                      "    config:\n"
                      "      base_url: " + admin.base_url() + "\n"
                      "      timeout: 1s\n");
    // Frozen: calls in flight and new ones time out; once resumed it processes what the
    // clients already gave up on, and the retries must not count those missions again.
    std::string logs;
    ASSERT_NO_FATAL_FAILURE(run_two_hosts_with_a_fault_mid_run(
        fleet, url, kMissions,
        [&] {
            admin.signal(SIGSTOP);
            std::this_thread::sleep_for(3s);
            admin.signal(SIGCONT);
        },
        logs));
    expect_final_invariants(url, kDocumentedRetryCodes, std::nullopt, "mission-log-forwarding");
    EXPECT_EQ(completed(url), kMissions) << status_summary(url);
    EXPECT_GT(count_lines(logs, "code=TIMEOUT"), 0);

    httplib::Client client("127.0.0.1", admin.port());
    const auto stats = client.Get("/api/stats/users");
    ASSERT_TRUE(stats && stats->status == 200);
    const auto body = nlohmann::json::parse(stats->body);
    std::map<std::string, long long> expected;
    for (const auto& row : db.exec("SELECT payload->>'user_id', count(*) FROM event_publication GROUP BY 1")) {
        expected[row[0].as<std::string>()] = row[1].as<long long>();
    }
    const auto users = body.at("users").get<std::map<std::string, long long>>();
    EXPECT_EQ(users, expected)
        << "each mission counted once per user, however often it was delivered";
    EXPECT_EQ(body.at("total").get<long long>(), kMissions);
    EXPECT_GT(body.at("replayed").get<long long>(), 0) << "lost answers were replayed from the idempotency store";
}

}  // namespace
}  // namespace outbox::test::fault
