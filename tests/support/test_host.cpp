#include "support/test_host.hpp"

#include <algorithm>
#include <stdexcept>
#include <thread>

#include <pqxx/pqxx>

namespace outbox::test {

dispatch::RuntimeOptions fast_options(const std::string& database_url, const std::string& host_id) {
    dispatch::RuntimeOptions o;
    o.database_url = database_url;
    o.pool_size = 4;
    o.host_id = host_id;
    o.poll_interval = std::chrono::milliseconds{100};
    o.batch_size = 20;
    o.lease_duration = std::chrono::seconds{5};
    o.max_attempts = 5;
    o.initial_backoff = std::chrono::milliseconds{0};
    o.max_backoff = std::chrono::milliseconds{0};
    o.concurrency = 4;
    o.shutdown_timeout = std::chrono::seconds{10};
    o.abandon_grace = std::chrono::seconds{2};
    return o;
}

namespace {

config::Config config_from(const dispatch::RuntimeOptions& options, const plugin::HandlerConfigs& configs,
                           std::chrono::milliseconds handler_timeout,
                           const std::map<std::string, config::HandlerSettings>& settings) {
    config::Config config;
    config.outbox = options;
    config.database.url = options.database_url;
    config.database.pool_size = options.pool_size;
    config.database.startup_timeout = std::chrono::milliseconds{0};
    config.outbox.handler_timeout = handler_timeout;
    config.admin.listen = "off";
    config.admin.listen_address.reset();
    for (const auto& [name, json] : configs) config.handlers[name].config_json = json;
    for (const auto& [name, explicit_settings] : settings) config.handlers[name] = explicit_settings;
    return config;
}

}  // namespace

TestHost::TestHost(dispatch::RuntimeOptions options, const std::vector<std::string>& plugin_files,
                   const plugin::HandlerConfigs& configs, std::chrono::milliseconds handler_timeout,
                   const std::map<std::string, config::HandlerSettings>& settings)
    : TestHost(config_from(options, configs, handler_timeout, settings), plugin_files) {
    incarnation_ = options.incarnation;
}

TestHost::TestHost(config::Config config, const std::vector<std::string>& plugin_files)
    : config_(std::move(config)), expected_plugins_(plugin_files.size()) {
    namespace fs = std::filesystem;
    // Deployed as an operator would: root-owned, not writable by group or others.
    fs::permissions(plugin_dir_.path(), fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                            fs::perms::others_read | fs::perms::others_exec);
    for (const auto& file : plugin_files) {
        const fs::path target = plugin_dir_.path() / fs::path(file).filename();
        fs::copy_file(file, target, fs::copy_options::overwrite_existing);
        fs::permissions(target, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                                    fs::perms::others_read);
    }
    config_.plugins.dir = plugin_dir_.path().string();
}

TestHost::~TestHost() {
    if (host_ && !stop() && host_->runtime() != nullptr) {
        // Its stuck threads still use the host: keep it (reachable, so not reported as a leak).
        static std::vector<std::unique_ptr<app::Host>> kept;
        kept.push_back(std::move(host_));
    }
}

void TestHost::start() {
    app::Host::Options options;
    options.incarnation = incarnation_;
    host_ = std::make_unique<app::Host>(config_, std::move(options));
    std::stop_source never;
    if (!host_->start(never.get_token())) throw std::runtime_error("test host did not start");
    handlers_ = host_->runtime()->handlers();
    if (handlers_->entries().size() != expected_plugins_) {
        throw std::runtime_error("test host loaded " + std::to_string(handlers_->entries().size()) + " of " +
                                 std::to_string(expected_plugins_) + " plugin(s); see the log for the refusal");
    }
}

bool TestHost::stop() { return !host_ || host_->stop() == 0; }

std::map<std::string, std::string> outboxd_env(const std::string& database_url, const std::filesystem::path& plugin_dir) {
    return {{"OUTBOX_DATABASE_URL", database_url},
            {"OUTBOX_PLUGIN_DIR", plugin_dir.string()},
            {"OUTBOX_LEASE_DURATION", "2s"},
            {"OUTBOX_POLL_INTERVAL", "200ms"},
            {"OUTBOX_INITIAL_BACKOFF", "100ms"},
            {"OUTBOX_MAX_BACKOFF", "1s"},
            {"OUTBOX_ADMIN_LISTEN", "off"},
            {"OUTBOX_SHUTDOWN_TIMEOUT", "10s"}};
}

bool wait_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
        if (condition()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds{20});
    }
    return condition();
}

void create_scripted_effect_table(const std::string& database_url) {
    pqxx::connection conn(database_url);
    pqxx::work tx(conn);
    tx.exec(
        "CREATE TABLE IF NOT EXISTS scripted_effect (event_id uuid NOT NULL, handler_name text NOT NULL, "
        "attempt int NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())");
    tx.commit();
}

std::vector<double> scripted_effect_times(const std::string& database_url) {
    pqxx::connection conn(database_url);
    pqxx::read_transaction tx(conn);
    std::vector<double> times;
    for (const auto& row : tx.exec("SELECT extract(epoch FROM at)::float8 FROM scripted_effect ORDER BY at")) {
        times.push_back(row[0].as<double>());
    }
    return times;
}

int worst_call_overlap(const std::vector<double>& ends, double call) {
    int worst = 0;
    for (const double t : ends) {
        const int overlapping = static_cast<int>(std::count_if(ends.begin(), ends.end(), [&](double other) {
            return other > t - 0.005 && other - call < t - 0.005;
        }));
        worst = std::max(worst, overlapping);
    }
    return worst;
}

std::vector<std::string> publish_many(const std::string& database_url, const std::string& event_type,
                                      const std::string& payload_json, int count, const std::string& company) {
    std::vector<std::string> ids;
    ids.reserve(static_cast<std::size_t>(count));
    pqxx::connection conn(database_url);
    for (int done = 0; done < count;) {
        const int n = std::min(1000, count - done);
        pqxx::work tx(conn);
        const pqxx::result rows =
            tx.exec_params("SELECT outbox_publish($1, $2, $3::jsonb)::text FROM generate_series(1, $4)", company,
                           event_type, payload_json, n);
        tx.commit();
        for (const auto& row : rows) ids.emplace_back(row[0].c_str());
        done += n;
    }
    return ids;
}

}  // namespace outbox::test
