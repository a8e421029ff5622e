// The operations surface of the real binary: the admin listener's start-up, a host with
// processing disabled that still serves, `outboxd retry` and `outboxd operations`.
#include <gtest/gtest.h>

#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <httplib.h>
#include <jwt.h>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "support/child_process.hpp"
#include "support/pg_fixture.hpp"
#include "support/plugin_dir.hpp"
#include "support/ports.hpp"
#include "support/temp_dir.hpp"
#include "support/test_host.hpp"

namespace outbox::test {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* kSecret = "e2e-admin-secret-0123456789abcdefghij";  // at least 32 bytes

std::string admin_token(const std::string& company, std::chrono::seconds lifetime = std::chrono::minutes{5}) {
    jwt_t* jwt = nullptr;
    jwt_new(&jwt);
    const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    const json claims{{"sub", "e2e-operator"},
                      {"role", "ADMIN"},
                      {"company_id", company},
                      {"iat", now},
                      {"exp", now + lifetime.count()}};
    jwt_add_grants_json(jwt, claims.dump().c_str());
    jwt_set_alg(jwt, JWT_ALG_HS256, reinterpret_cast<const unsigned char*>(kSecret),
                static_cast<int>(std::strlen(kSecret)));
    char* text = jwt_encode_str(jwt);
    std::string token = text == nullptr ? "" : text;
    std::free(text);
    jwt_free(jwt);
    return token;
}

class AdminE2e : public ::testing::Test {
protected:
    void SetUp() override {
        create_scripted_effect_table(db_.url());
        plugin_dir_ = scripted_plugin_dir(dir_.path());
    }
    std::map<std::string, std::string> env(int port) const {
        return {{"OUTBOX_DATABASE_URL", db_.url()},
                {"OUTBOX_PLUGIN_DIR", plugin_dir_.string()},
                {"OUTBOX_POLL_INTERVAL", "100ms"},
                {"OUTBOX_ADMIN_LISTEN", "127.0.0.1:" + std::to_string(port)},
                {"OUTBOX_ADMIN_JWT_SECRET", kSecret},
                {"OUTBOX_SHUTDOWN_TIMEOUT", "5s"}};
    }
    std::string log(const std::string& name) const { return read_file((dir_.path() / name).string()); }
    long long count(const std::string& sql) const { return std::stoll(db_.scalar(sql)); }

    TestDatabase db_;
    TempDir dir_;
    fs::path plugin_dir_;
};

TEST_F(AdminE2e, ABusyAdminAddressIsAStartUpErrorAndNothingIsClaimed) {
    publish_many(db_.url(), "TestRequested", "{}", 3);
    const HeldPort busy;
    const auto [code, output] = run_command({OUTBOXD_BINARY, "run"}, env(busy.port()), 30s);
    EXPECT_EQ(code, 1) << output;
    EXPECT_NE(output.find("cannot listen on 127.0.0.1:" + std::to_string(busy.port())), std::string::npos) << output;
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE attempt_count > 0"), 0) << "it exits before claiming";
}

// A limit that cannot hold admin.max_connections, the probe places, the database pools and
// the plugin files refuses the start with one line, before anything is claimed; the soft
// limit is raised to the hard one first, so only a low hard limit refuses.
TEST_F(AdminE2e, AnOpenFileLimitTooLowForTheConfigurationIsAStartUpErrorWithExitTwo) {
    publish_many(db_.url(), "TestRequested", "{}", 3);
    auto environment = env(free_port());
    environment["OUTBOX_ADMIN_MAX_CONNECTIONS"] = "1000";
    const auto [code, output] =
        run_command({"/usr/bin/prlimit", "--nofile=64:512", "--", OUTBOXD_BINARY, "run"}, environment, 30s);
    EXPECT_EQ(code, 2) << output;
    EXPECT_NE(output.find("the open-file limit is 512 (hard limit 512)"), std::string::npos) << output;
    EXPECT_EQ(std::count(output.begin(), output.end(), '\n'), 1) << "one line: " << output;
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE attempt_count > 0"), 0) << "it exits before claiming";
}

TEST_F(AdminE2e, AnUnreadablePublicKeyFileIsAConfigError) {
    auto environment = env(free_port());
    environment["OUTBOX_ADMIN_JWT_PUBLIC_KEY_FILE"] = (dir_.path() / "missing.pem").string();
    environment["OUTBOX_ADMIN_JWT_AUDIENCE"] = "outboxd-admin";
    const auto [code, output] = run_command({OUTBOXD_BINARY, "run"}, environment, 30s);
    EXPECT_EQ(code, 2) << output;
    EXPECT_NE(output.find("admin.jwt_public_key_file"), std::string::npos) << output;
    EXPECT_EQ(std::count(output.begin(), output.end(), '\n'), 1) << "one line, before anything starts: " << output;
}

TEST_F(AdminE2e, AWeakTokenPolicyIsAConfigErrorThatNeverShowsTheSecret) {
    auto short_secret = env(free_port());
    short_secret["OUTBOX_ADMIN_JWT_SECRET"] = "short-but-sweet-secret";
    const auto [code, output] = run_command({OUTBOXD_BINARY, "run"}, short_secret, 30s);
    EXPECT_EQ(code, 2) << output;
    EXPECT_NE(output.find("OUTBOX_ADMIN_JWT_SECRET is shorter than 32 bytes"), std::string::npos) << output;
    EXPECT_EQ(output.find("short-but-sweet"), std::string::npos) << "the secret must not be printed: " << output;
    EXPECT_EQ(std::count(output.begin(), output.end(), '\n'), 1) << output;

    auto no_audience = env(free_port());
    const fs::path key = dir_.path() / "idp.pem";
    std::ofstream(key) << "-----BEGIN PUBLIC KEY-----\n";
    no_audience["OUTBOX_ADMIN_JWT_PUBLIC_KEY_FILE"] = key.string();
    const auto [rs256_code, rs256_output] = run_command({OUTBOXD_BINARY, "run"}, no_audience, 30s);
    EXPECT_EQ(rs256_code, 2) << rs256_output;
    EXPECT_NE(rs256_output.find("admin.jwt_audience is required when admin.jwt_public_key_file is set"),
              std::string::npos)
        << rs256_output;
    EXPECT_EQ(std::count(rs256_output.begin(), rs256_output.end(), '\n'), 1) << rs256_output;
}

// Plugins run in-process: the env_probe fixture records, from its library constructor and
// its handler's, whether it can see the secret. The host must still verify tokens with it.
TEST_F(AdminE2e, TheSecretLeavesTheEnvironmentBeforeAnyPluginLoadsAndStillVerifiesTokens) {
    fs::copy_file(OUTBOX_FIXTURE_ENV_PROBE, plugin_dir_ / "libenv_probe.so");
    const fs::path probe = dir_.path() / "probe.txt";
    const int port = free_port();
    auto environment = env(port);
    environment["OUTBOX_TEST_PROBE_FILE"] = probe.string();
    environment["OUTBOX_ADMIN_JWT_MAX_LIFETIME"] = "10m";
    ChildProcess host({OUTBOXD_BINARY, "run"}, environment, (dir_.path() / "probe-host.log").string());
    httplib::Client client("127.0.0.1", port);
    client.set_connection_timeout(1s);
    ASSERT_TRUE(wait_until([&] { return static_cast<bool>(client.Get("/healthz")); }, 20s)) << log("probe-host.log");

    const std::string seen = read_file(probe.string());
    EXPECT_NE(seen.find("loaded secret=unset\n"), std::string::npos) << seen;
    EXPECT_NE(seen.find("constructed secret=unset\n"), std::string::npos) << seen;
    EXPECT_EQ(seen.find("secret=set"), std::string::npos) << "a plugin saw the secret: " << seen;
    const std::string initial_environment = read_file("/proc/" + std::to_string(host.pid()) + "/environ");
    EXPECT_NE(initial_environment.find("OUTBOX_TEST_PROBE_FILE="), std::string::npos) << "read the right process";
    EXPECT_EQ(initial_environment.find(kSecret), std::string::npos)
        << "the value is overwritten in the initial environment block too";

    const auto within = client.Get("/api/v1/admin/outbox-events", {{"Authorization", "Bearer " + admin_token("acme")}});
    ASSERT_TRUE(within);
    EXPECT_EQ(within->status, 200) << "the host kept the secret it read: " << within->body;
    const auto too_long = client.Get("/api/v1/admin/outbox-events",
                                     {{"Authorization", "Bearer " + admin_token("acme", std::chrono::minutes{11})}});
    ASSERT_TRUE(too_long);
    EXPECT_EQ(too_long->status, 401) << "OUTBOX_ADMIN_JWT_MAX_LIFETIME=10m: " << too_long->body;
    host.signal(SIGTERM);
    EXPECT_EQ(host.wait(20s), std::optional<int>(0)) << log("probe-host.log");
}

TEST_F(AdminE2e, WithProcessingDisabledTheHostClaimsNothingButServesMetricsAndTheApi) {
    const auto ids = publish_many(db_.url(), "TestRequested", "{}", 3);
    const int port = free_port();
    auto environment = env(port);
    environment["OUTBOX_ENABLED"] = "false";
    ChildProcess host({OUTBOXD_BINARY, "run"}, environment, (dir_.path() / "disabled.log").string());
    httplib::Client client("127.0.0.1", port);
    client.set_connection_timeout(1s);
    ASSERT_TRUE(wait_until([&] { return static_cast<bool>(client.Get("/healthz")); }, 20s)) << log("disabled.log");

    const auto ready = client.Get("/readyz");
    ASSERT_TRUE(ready);
    EXPECT_EQ(ready->status, 200) << ready->body;
    const auto metrics = client.Get("/metrics");
    ASSERT_TRUE(metrics);
    EXPECT_EQ(metrics->status, 200);
    EXPECT_NE(metrics->body.find("outbox_publications_backlog{status=\"PENDING\"} 3\n"), std::string::npos)
        << metrics->body;
    const auto list = client.Get("/api/v1/admin/outbox-events?status=PENDING",
                                 {{"Authorization", "Bearer " + admin_token("acme")}});
    ASSERT_TRUE(list);
    EXPECT_EQ(list->status, 200) << list->body;
    EXPECT_EQ(json::parse(list->body)["events"].size(), 3u);

    std::this_thread::sleep_for(1s);  // several poll intervals
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE status = 'PENDING' AND attempt_count = 0"), 3);
    host.signal(SIGTERM);
    EXPECT_EQ(host.wait(20s), std::optional<int>(0)) << log("disabled.log");
}

TEST_F(AdminE2e, RetryCommandFollowsTheApiRules) {
    pqxx::connection conn(db_.url());
    std::string id;
    {
        pqxx::work tx(conn);
        id = tx.exec1("SELECT outbox_publish('acme', 'TestRequested', '{}'::jsonb)::text")[0].as<std::string>();
        tx.exec_params0("UPDATE event_publication SET status = 'REVIEW_REQUIRED', attempt_count = 8, version = 7, "
                        "last_error_code = 'HTTP_503' WHERE event_id = $1::uuid",
                        id);
        tx.commit();
    }
    const auto environment = env(free_port());
    auto retry = [&](const std::string& version, const std::string& reason, const std::string& key) {
        return run_command({OUTBOXD_BINARY, "retry", id, "--expected-version", version, "--reason", reason,
                            "--idempotency-key", key},
                           environment, 30s);
    };
    const std::string reason = "remote API fixed, see INC-1234";

    const auto stale = retry("6", reason, "cli-1");
    EXPECT_EQ(stale.first, 1) << stale.second;
    EXPECT_NE(stale.second.find("VERSION_CONFLICT"), std::string::npos) << stale.second;
    EXPECT_NE(stale.second.find("version 7"), std::string::npos) << stale.second;
    const auto terse = retry("7", "too short", "cli-1");
    EXPECT_EQ(terse.first, 1) << terse.second;
    EXPECT_NE(terse.second.find("INVALID_REASON"), std::string::npos) << terse.second;

    const auto done = retry("7", reason, "cli-1");
    EXPECT_EQ(done.first, 0) << done.second;
    EXPECT_NE(done.second.find("re-driven"), std::string::npos) << done.second;
    EXPECT_EQ(db_.scalar("SELECT status || '/' || attempt_count || '/' || version FROM event_publication"),
              "PENDING/0/8");
    const passwd* user = ::getpwuid(::geteuid());
    ASSERT_NE(user, nullptr);
    EXPECT_EQ(db_.scalar("SELECT actor FROM outbox_manual_retry"), std::string("cli:") + user->pw_name);
    EXPECT_EQ(db_.scalar("SELECT detail->>'channel' FROM audit_event"), "cli");

    const auto replay = retry("7", reason, "cli-1");
    EXPECT_EQ(replay.first, 0) << replay.second;
    EXPECT_NE(replay.second.find("nothing done now"), std::string::npos) << replay.second;
    const auto reused = retry("8", reason, "cli-1");
    EXPECT_EQ(reused.first, 1) << reused.second;
    EXPECT_NE(reused.second.find("IDEMPOTENCY_KEY_REUSED"), std::string::npos) << reused.second;
    const auto again = retry("8", reason, "cli-2");
    EXPECT_EQ(again.first, 1) << again.second;
    EXPECT_NE(again.second.find("NOT_IN_REVIEW"), std::string::npos) << again.second;
    EXPECT_EQ(count("SELECT count(*) FROM outbox_manual_retry"), 1);

    const auto unknown = run_command({OUTBOXD_BINARY, "retry", "0b6f4d1e-8a53-4c1a-9a57-3c8f1a2b7e10",
                                      "--expected-version", "1", "--reason", reason, "--idempotency-key", "k"},
                                     environment, 30s);
    EXPECT_EQ(unknown.first, 1) << unknown.second;
    EXPECT_NE(unknown.second.find("EVENT_NOT_FOUND"), std::string::npos) << unknown.second;
    for (const auto& output : {stale.second, terse.second, reused.second, unknown.second}) {
        EXPECT_EQ(std::count(output.begin(), output.end(), '\n'), 1) << "one line: " << output;
    }
}

TEST_F(AdminE2e, OperationsCommandsRunAJobInBatchesAndARunningHostFinishesADetachedOne) {
    db_.exec("SELECT outbox_publish(c, 'TestRequested', '{}'::jsonb) "
             "FROM (SELECT CASE WHEN i <= 1200 THEN 'acme' ELSE 'globex' END AS c FROM generate_series(1, 1203) i) s");
    db_.exec("UPDATE event_publication SET status = 'REVIEW_REQUIRED', attempt_count = 3, version = 4, "
             "last_error_code = 'HTTP_422', next_attempt_at = now() + interval '1 hour'");
    const auto environment = env(free_port());
    const std::string reason = "remote fixed after incident 42";
    auto operations = [&](std::vector<std::string> args) {
        args.insert(args.begin(), {OUTBOXD_BINARY, "operations"});
        return run_command(args, environment, 60s);
    };

    const auto dry = operations({"start", "--action", "redrive", "--code", "HTTP_422", "--company", "acme", "--reason",
                                 reason, "--dry-run"});
    EXPECT_EQ(dry.first, 0) << dry.second;
    EXPECT_NE(dry.second.find("1200 event(s) match; nothing changed"), std::string::npos) << dry.second;
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE status = 'REVIEW_REQUIRED'"), 1203);
    const auto keyless = operations({"start", "--action", "redrive", "--code", "HTTP_422", "--reason", reason});
    EXPECT_EQ(keyless.first, 2) << keyless.second;
    const auto bad = operations({"start", "--action", "redrive", "--status", "PENDING", "--reason", reason,
                                 "--idempotency-key", "cli-op-0"});
    EXPECT_EQ(bad.first, 1) << bad.second;
    EXPECT_NE(bad.second.find("INVALID_STATUS"), std::string::npos) << bad.second;

    const auto run = operations({"start", "--action", "redrive", "--code", "HTTP_422", "--company", "acme", "--reason",
                                 reason, "--idempotency-key", "cli-op-1"});
    ASSERT_EQ(run.first, 0) << run.second;
    EXPECT_NE(run.second.find(": done, 1200 of 1200 done, 0 failed"), std::string::npos) << run.second;
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE company_id = 'acme' AND status = 'PENDING'"), 1200);
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE company_id = 'globex' AND status = 'REVIEW_REQUIRED'"), 3);
    EXPECT_EQ(count("SELECT count(*) FROM outbox_manual_retry"), 1200);
    EXPECT_EQ(count("SELECT count(*) FROM audit_event WHERE action = 'outbox.manual_retry' AND detail ->> 'channel' = 'cli'"),
              1200);
    const auto id_at = run.second.find("operation ") + std::strlen("operation ");
    const std::string id = run.second.substr(id_at, 36);

    const auto replay = operations({"start", "--action", "redrive", "--code", "HTTP_422", "--company", "acme",
                                    "--reason", reason, "--idempotency-key", "cli-op-1"});
    EXPECT_EQ(replay.first, 0) << replay.second;
    EXPECT_NE(replay.second.find("operation " + id + ": already started"), std::string::npos) << replay.second;
    const auto shown = operations({"show", id, "--format", "json"});
    ASSERT_EQ(shown.first, 0) << shown.second;
    const json status = json::parse(shown.second);
    EXPECT_EQ(status["state"], "done");
    EXPECT_EQ(status["total"], 1200);
    EXPECT_EQ(status["done"], 1200);
    const auto over = operations({"cancel", id});
    EXPECT_EQ(over.first, 0) << over.second;
    EXPECT_NE(over.second.find("already over"), std::string::npos) << over.second;
    EXPECT_EQ(operations({"show", "0b6f4d1e-8a53-4c1a-9a57-3c8f1a2b7e10"}).first, 1);

    // Detached: the command only starts the job; a running host (even one that claims
    // nothing) works it.
    const auto detached = operations({"start", "--action", "discard", "--company", "globex", "--status",
                                      "REVIEW_REQUIRED", "--reason", reason, "--idempotency-key", "cli-op-2", "--detach"});
    ASSERT_EQ(detached.first, 0) << detached.second;
    const std::string second = detached.second.substr(detached.second.find("operation ") + 10, 36);
    EXPECT_EQ(db_.scalar("SELECT state FROM outbox_operation WHERE id = '" + second + "'"), "running");
    // The list: newest first, every company's, narrowed by state.
    const auto listed = operations({"list", "--format", "json"});
    ASSERT_EQ(listed.first, 0) << listed.second;
    const json jobs = json::parse(listed.second)["operations"];
    ASSERT_EQ(jobs.size(), 2u) << listed.second;
    EXPECT_EQ(jobs[0]["operation_id"], second);
    EXPECT_EQ(jobs[0]["state"], "running");
    EXPECT_EQ(jobs[1]["operation_id"], id);
    EXPECT_EQ(jobs[1]["state"], "done");
    const auto running = operations({"list", "--state", "running"});
    ASSERT_EQ(running.first, 0) << running.second;
    EXPECT_NE(running.second.find("operation " + second + " (discard): running"), std::string::npos) << running.second;
    EXPECT_EQ(running.second.find(id), std::string::npos) << running.second;
    EXPECT_EQ(operations({"list", "--state", "paused"}).first, 2);
    EXPECT_EQ(operations({"list", "--limit", "101"}).first, 2);
    auto host_env = environment;
    host_env["OUTBOX_ENABLED"] = "false";
    ChildProcess host({OUTBOXD_BINARY, "run"}, host_env, (dir_.path() / "jobs-host.log").string());
    EXPECT_TRUE(wait_until([&] { return db_.scalar("SELECT state FROM outbox_operation WHERE id = '" + second + "'") == "done"; },
                           30s))
        << log("jobs-host.log");
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE company_id = 'globex' AND status = 'DISCARDED'"), 3);
    EXPECT_NE(operations({"list", "--state", "running"}).second.find("no operation in state running"), std::string::npos);
    host.signal(SIGTERM);
    EXPECT_EQ(host.wait(20s), std::optional<int>(0)) << log("jobs-host.log");
}

TEST_F(AdminE2e, OperationsStartReplaysCompletedEventsForOneHandlerOnly) {
    std::filesystem::copy_file(OUTBOX_FIXTURE_SCRIPTED_B, plugin_dir_ / "libscripted_b.so");
    db_.exec(R"(SELECT outbox_publish('acme', 'TestRequested', '{"db": true, "b_db": true}'::jsonb) )"
             "FROM generate_series(1, 20)");
    const auto environment = env(free_port());
    ChildProcess host({OUTBOXD_BINARY, "run"}, environment, (dir_.path() / "replay-host.log").string());
    const auto effects = [&](const std::string& name) {
        return count("SELECT count(*) FROM scripted_effect WHERE handler_name = '" + name + "'");
    };
    ASSERT_TRUE(wait_until([&] {
        return effects("scripted") == 20 && effects("scripted-b") == 20 &&
               count("SELECT count(*) FROM event_publication WHERE status <> 'COMPLETED'") == 0;
    }, 30s)) << log("replay-host.log");

    const std::string reason = "handler fixed in release 1.4.2";
    const auto nameless = run_command({OUTBOXD_BINARY, "operations", "start", "--action", "replay", "--status",
                                       "COMPLETED", "--reason", reason, "--idempotency-key", "cli-replay-0"},
                                      environment, 60s);
    EXPECT_EQ(nameless.first, 1) << nameless.second;
    EXPECT_NE(nameless.second.find("INVALID_HANDLER"), std::string::npos) << nameless.second;
    const auto run = run_command({OUTBOXD_BINARY, "operations", "start", "--action", "replay", "--handler",
                                  "scripted-b", "--status", "COMPLETED", "--reason", reason, "--idempotency-key",
                                  "cli-replay-1"},
                                 environment, 60s);
    ASSERT_EQ(run.first, 0) << run.second;
    EXPECT_NE(run.second.find(": done, 20 of 20 done, 0 failed"), std::string::npos) << run.second;
    EXPECT_TRUE(wait_until([&] { return effects("scripted-b+replay") == 20; }, 30s)) << log("replay-host.log");
    EXPECT_TRUE(wait_until([&] { return count("SELECT count(*) FROM event_publication WHERE status <> 'COMPLETED'") == 0; },
                           30s));
    EXPECT_EQ(effects("scripted"), 20) << "only the named handler runs again";
    EXPECT_EQ(count("SELECT count(*) FROM audit_event WHERE action = 'outbox.replay' AND detail ->> 'channel' = 'cli' "
                    "AND detail ->> 'handler' = 'scripted-b'"),
              20);
    host.signal(SIGTERM);
    EXPECT_EQ(host.wait(20s), std::optional<int>(0)) << log("replay-host.log");
}

// `outboxd events show ID`: the event's status and every call of its attempts, with the
// host that ran it (the CLI is the platform's view), as text or JSON; an unknown or malformed
// id exits 1.
TEST_F(AdminE2e, EventsShowPrintsEveryAttemptOfAnEvent) {
    const std::string id = db_.scalar(R"(SELECT outbox_publish('acme', 'TestRequested', '{"fail_times": 1}'::jsonb))");
    auto environment = env(free_port());
    environment["OUTBOX_HOST_ID"] = "show-host";
    environment["OUTBOX_INITIAL_BACKOFF"] = "10ms";
    ChildProcess host({OUTBOXD_BINARY, "run"}, environment, (dir_.path() / "show-host.log").string());
    ASSERT_TRUE(wait_until([&] {
        return db_.scalar("SELECT status FROM event_publication WHERE event_id = '" + id + "'") == "COMPLETED";
    }, 30s)) << log("show-host.log");
    host.signal(SIGTERM);
    EXPECT_EQ(host.wait(20s), std::optional<int>(0)) << log("show-host.log");

    const auto text = run_command({OUTBOXD_BINARY, "events", "show", id}, environment, 30s);
    ASSERT_EQ(text.first, 0) << text.second;
    for (const char* expected : {"COMPLETED, 2 attempt(s)", "SCRIPTED_FLAKY", "retry", "succeeded", "show-host"}) {
        EXPECT_NE(text.second.find(expected), std::string::npos) << expected << " in " << text.second;
    }
    const auto as_json = run_command({OUTBOXD_BINARY, "events", "show", id, "--format", "json"}, environment, 30s);
    ASSERT_EQ(as_json.first, 0) << as_json.second;
    const auto answer = nlohmann::json::parse(as_json.second.substr(as_json.second.find('{')));
    EXPECT_EQ(answer["status"], "COMPLETED");
    ASSERT_EQ(answer["attempts"].size(), 2u) << as_json.second;
    EXPECT_EQ(answer["attempts"][0]["outcome"], "retry");
    EXPECT_EQ(answer["attempts"][0]["host"], "show-host");
    EXPECT_EQ(answer["attempts"][1]["attempt"], 2);
    EXPECT_EQ(answer.dump().find("fail_times"), std::string::npos) << "never the payload";

    const auto unknown = run_command({OUTBOXD_BINARY, "events", "show", "0b6f4d1e-8a53-4c1a-9a57-3c8f1a2b7e10"},
                                     environment, 30s);
    EXPECT_EQ(unknown.first, 1);
    EXPECT_NE(unknown.second.find("EVENT_NOT_FOUND"), std::string::npos) << unknown.second;
    EXPECT_EQ(run_command({OUTBOXD_BINARY, "events", "show", "not-an-id"}, environment, 30s).first, 1);
}

TEST_F(AdminE2e, AReplayWithNoHostRunningItsHandlerSaysItWaitsAndCanBeCancelled) {
    const auto environment = env(free_port());
    {
        // A host registers the handler in the fleet, then stops.
        ChildProcess host({OUTBOXD_BINARY, "run"}, environment, (dir_.path() / "register.log").string());
        ASSERT_TRUE(wait_until([&] { return count("SELECT count(*) FROM outbox_host") == 1; }, 30s))
            << log("register.log");
        host.signal(SIGTERM);
        ASSERT_EQ(host.wait(20s), std::optional<int>(0)) << log("register.log");
    }
    db_.exec("SELECT outbox_publish('acme', 'TestRequested', '{}'::jsonb) FROM generate_series(1, 600)");
    db_.exec("UPDATE event_publication SET status = 'COMPLETED', completed_at = now(), version = 3");

    const std::string reason = "handler fixed in release 1.4.2";
    // The command waits for the handler, which nothing runs: the test stops it once it
    // said so (and a little later, to see it is said only once).
    const std::string said = "waiting for the handler to finish the replayed events";
    std::string output;
    {
        ChildProcess waiting({OUTBOXD_BINARY, "operations", "start", "--action", "replay", "--handler", "scripted",
                              "--reason", reason, "--status", "COMPLETED", "--idempotency-key", "cli-replay-wait"},
                             environment, (dir_.path() / "replay-wait.log").string());
        EXPECT_TRUE(wait_until([&] { return log("replay-wait.log").find(said) != std::string::npos; }, 30s))
            << log("replay-wait.log");
        std::this_thread::sleep_for(1s);
        EXPECT_FALSE(waiting.wait(0ms).has_value()) << "still waiting when the test stopped it:\n" << log("replay-wait.log");
        waiting.signal(SIGTERM);
        waiting.wait(10s);
        output = log("replay-wait.log");
    }
    EXPECT_NE(output.find("500 of 600 done"), std::string::npos) << output;
    const auto first = output.find(said);
    EXPECT_NE(first, std::string::npos) << output;
    EXPECT_EQ(output.find(said, first + 1), std::string::npos) << "said once:\n" << output;
    const std::string id = db_.scalar("SELECT id FROM outbox_operation");
    EXPECT_EQ(db_.scalar("SELECT state || ' ' || done FROM outbox_operation"), "running 500");

    const auto cancelled = run_command({OUTBOXD_BINARY, "operations", "cancel", id}, environment, 30s);
    EXPECT_EQ(cancelled.first, 0) << cancelled.second;
    EXPECT_NE(cancelled.second.find("cancelled, 500 of 600 done"), std::string::npos) << cancelled.second;
}

}  // namespace
}  // namespace outbox::test
