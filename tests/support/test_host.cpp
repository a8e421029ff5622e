#include "support/test_host.hpp"

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
    return o;
}

TestHost::TestHost(dispatch::RuntimeOptions options, const std::vector<std::string>& plugin_files,
                   const plugin::HandlerConfigs& configs, std::chrono::milliseconds handler_timeout,
                   const std::map<std::string, config::HandlerSettings>& settings_by_handler) {
    plugin::PluginLoader loader(private_dir_.path());
    std::vector<dispatch::HandlerEntry> entries;
    for (const auto& file : plugin_files) {
        auto result = loader.load_file(file, configs);
        if (auto* rejected = std::get_if<plugin::RejectedPlugin>(&result)) {
            throw std::runtime_error("test plugin rejected: " + file + ": " + rejected->reason);
        }
        auto& loaded = std::get<plugin::LoadedPlugin>(result);
        config::HandlerSettings settings;
        settings.timeout = handler_timeout;
        const auto found = configs.find(loaded.handler_name);
        if (found != configs.end()) settings.config_json = found->second;
        const auto explicit_settings = settings_by_handler.find(loaded.handler_name);
        if (explicit_settings != settings_by_handler.end()) settings = explicit_settings->second;
        entries.push_back({loaded.handler_name, loaded.event_types, loaded.handler, settings, loaded.file});
    }
    handlers_ = std::make_shared<const dispatch::HandlerSet>(std::move(entries));
    runtime_ = std::make_unique<dispatch::Runtime>(std::move(options), handlers_, metrics_);
}

TestHost::~TestHost() { runtime_->stop(); }

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
