#include "fleet/fleet_registry.hpp"

#include <algorithm>
#include <functional>
#include <thread>
#include <utility>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "db/connect.hpp"
#include "db/db_session.hpp"

namespace outbox::fleet {
namespace {

constexpr const char* kUpsertSql = R"SQL(
INSERT INTO outbox_host (host_id, version, started_at, last_heartbeat_at, heartbeat_interval_ms, stopped_at, enabled, handlers,
                         abandoned_threads, schema_needed, schema_supported_max, incarnation)
VALUES ($1, $2, to_timestamp($3::float8), now(), $4, CASE WHEN $5 THEN now() END, $6, $7::jsonb, $8, $9, $10, $11)
ON CONFLICT (host_id) DO UPDATE
SET version = excluded.version, started_at = excluded.started_at, last_heartbeat_at = now(),
    heartbeat_interval_ms = excluded.heartbeat_interval_ms, stopped_at = excluded.stopped_at,
    enabled = excluded.enabled, handlers = excluded.handlers, abandoned_threads = excluded.abandoned_threads,
    schema_needed = excluded.schema_needed, schema_supported_max = excluded.schema_supported_max,
    incarnation = excluded.incarnation
)SQL";

// The first write takes the id only if the row is this process's, stopped, silent for three
// beats, or still shows the beat the start-up check watched not move.
const std::string kAnnounceSql = std::string(kUpsertSql) + R"SQL(
WHERE outbox_host.stopped_at IS NOT NULL OR outbox_host.incarnation IS NOT DISTINCT FROM excluded.incarnation
   OR outbox_host.last_heartbeat_at <= now() - 3 * outbox_host.heartbeat_interval_ms * interval '1 millisecond'
   OR outbox_host.last_heartbeat_at = NULLIF($12, '')::timestamptz
RETURNING 1
)SQL";

// The row of another process running under this host id: not stopped, heartbeating within
// three of its intervals, and of another incarnation (NULL: a host of 0.2.0).
constexpr const char* kTwinSql = R"SQL(
SELECT last_heartbeat_at::text, heartbeat_interval_ms, version,
       to_char(started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
FROM outbox_host
WHERE host_id = $1 AND stopped_at IS NULL AND incarnation IS DISTINCT FROM $2
  AND last_heartbeat_at > now() - 3 * heartbeat_interval_ms * interval '1 millisecond'
)SQL";

constexpr const char* kForgetSql = R"SQL(
DELETE FROM outbox_host WHERE last_heartbeat_at < now() - $1::bigint * interval '1 millisecond'
)SQL";

constexpr const char* kReadSql = R"SQL(
SELECT host_id, version, to_char(started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
       to_char(last_heartbeat_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
       extract(epoch FROM now() - last_heartbeat_at)::float8,
       stopped_at IS NULL AND last_heartbeat_at > now() - 3 * heartbeat_interval_ms * interval '1 millisecond',
       stopped_at IS NOT NULL, enabled, handlers::text,
       -- to_jsonb: `outboxd status` of a newer release also reads a fleet table that has not
       -- been migrated yet (the columns of V7 and V12 read as 0 then).
       coalesce((to_jsonb(h) ->> 'abandoned_threads')::integer, 0),
       coalesce((to_jsonb(h) ->> 'schema_needed')::integer, 0),
       coalesce((to_jsonb(h) ->> 'schema_supported_max')::integer, 0)
FROM outbox_host h ORDER BY host_id
)SQL";

std::string handlers_json(const routing::HandlerSet& handlers) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& entry : handlers.entries()) {
        list.push_back({{"handler", entry.name},
                        {"event_types", entry.event_types},
                        {"file", entry.file.filename().string()},
                        {"abi", entry.abi},
                        {"sha256", entry.sha256}});
    }
    return list.dump();
}

}  // namespace

FleetView read_fleet(pqxx::connection& conn) {
    FleetView view;
    pqxx::nontransaction tx(conn);
    for (const auto& row : tx.exec(kReadSql)) {
        HostRecord host;
        host.host_id = row[0].c_str();
        host.version = row[1].c_str();
        host.started_at = row[2].c_str();
        host.last_heartbeat_at = row[3].c_str();
        host.seconds_since_heartbeat = row[4].as<double>();
        host.live = row[5].as<bool>();
        host.stopped = row[6].as<bool>();
        host.enabled = row[7].as<bool>();
        host.abandoned_threads = row[9].as<int>();
        host.schema_needed = row[10].as<int>();
        host.schema_supported_max = row[11].as<int>();
        for (const auto& item : nlohmann::json::parse(row[8].c_str())) {
            host.handlers.push_back(HostHandler{item.value("handler", ""),
                                                item.value("event_types", std::vector<std::string>{}),
                                                item.value("file", ""), item.value("abi", ""),
                                                item.value("sha256", "")});
        }
        view.hosts.push_back(std::move(host));
    }
    std::stable_partition(view.hosts.begin(), view.hosts.end(), [](const HostRecord& h) { return h.live; });

    // For every event type any live, processing host handles: which handler set each
    // live processing host would run for it (the empty set when it does not claim it).
    std::set<std::string> types;
    std::vector<const HostRecord*> processing;
    for (const auto& host : view.hosts) {
        if (!host.live || !host.enabled) continue;
        processing.push_back(&host);
        for (const auto& handler : host.handlers) types.insert(handler.event_types.begin(), handler.event_types.end());
    }
    for (const auto& type : types) {
        Mismatch mismatch{type, {}};
        for (const HostRecord* host : processing) {
            std::set<std::string> names;
            for (const auto& handler : host->handlers) {
                if (std::find(handler.event_types.begin(), handler.event_types.end(), type) != handler.event_types.end()) {
                    names.insert(handler.handler);
                }
            }
            mismatch.handler_sets[names].push_back(host->host_id);
        }
        if (mismatch.handler_sets.size() > 1) view.mismatches.push_back(std::move(mismatch));
    }

    // The same handler from different builds (a roll-out in progress, or one host left
    // behind). Hosts of a release that reports no digest are left out, not guessed.
    std::map<std::string, std::map<std::string, std::vector<std::string>>> builds;
    for (const HostRecord* host : processing) {
        for (const auto& handler : host->handlers) {
            if (!handler.sha256.empty()) builds[handler.handler][handler.sha256].push_back(host->host_id);
        }
    }
    for (auto& [handler, by_digest] : builds) {
        if (by_digest.size() > 1) view.build_mismatches.push_back({handler, std::move(by_digest)});
    }
    return view;
}

namespace {

std::string twin_refusal(const std::string& host_id, const std::string& detail) {
    return "another outboxd process is running as host id '" + host_id + "' (" + detail +
           "); give each process its own outbox.host_id (OUTBOX_HOST_ID), or leave it unset";
}

}  // namespace

TwinCheck find_live_twin(pqxx::connection& conn, const std::string& host_id, const std::string& incarnation,
                         const std::stop_token& stop) {
    const auto read = [&]() -> std::optional<pqxx::row> {
        pqxx::nontransaction tx(conn);
        const pqxx::result rows = tx.exec_params(kTwinSql, host_id, incarnation);
        if (rows.empty()) return std::nullopt;
        return rows[0];
    };
    const auto first = read();
    if (!first) return {};
    // A process that crashed a moment ago left a row that still looks live: it is only
    // another process if its heartbeat moves on while this one watches.
    const std::string beat = (*first)[0].c_str();
    // The row's own interval, bounded: a hand-edited row cannot hold a start for long.
    const auto interval = std::clamp(std::chrono::milliseconds{(*first)[1].as<long long>()},
                                     std::chrono::milliseconds{100}, std::chrono::milliseconds{10'000});
    // A loaded host's heartbeat can run late by its write's own time and the scheduler's delay.
    const auto until = std::chrono::steady_clock::now() + interval + interval / 2 + std::chrono::seconds{1};
    while (std::chrono::steady_clock::now() < until && !stop.stop_requested()) {
        std::this_thread::sleep_for(std::chrono::milliseconds{100});
        const auto now = read();
        if (!now) return {};
        if (beat != (*now)[0].c_str()) {
            return {twin_refusal(host_id, std::string("outbox_host: release ") + (*now)[2].c_str() + ", started " +
                                              (*now)[3].c_str() + ", heartbeating"),
                    {}};
        }
    }
    return {std::nullopt, beat};
}

std::string release_summary(const FleetView& view) {
    // (release, schema needed) -> live hosts
    std::map<std::pair<int, std::string>, int, std::greater<>> releases;
    for (const auto& host : view.hosts) {
        if (host.live) ++releases[{host.schema_needed, host.version}];
    }
    if (releases.empty()) return "no live host";
    std::string text;
    for (const auto& [release, count] : releases) {
        text += (text.empty() ? "" : "; ") + release.second + " on " + std::to_string(count) + " live host" +
                (count == 1 ? "" : "s") + " (schema " +
                (release.first > 0 ? std::to_string(release.first) : std::string("unrecorded")) + ")";
    }
    return text;
}

nlohmann::json to_json(const FleetView& view) {
    nlohmann::json hosts = nlohmann::json::array();
    for (const auto& host : view.hosts) {
        nlohmann::json handlers = nlohmann::json::array();
        for (const auto& h : host.handlers) {
            handlers.push_back({{"handler", h.handler},
                                {"event_types", h.event_types},
                                {"file", h.file},
                                {"abi", h.abi},
                                {"sha256", h.sha256}});
        }
        hosts.push_back({{"host_id", host.host_id},
                         {"version", host.version},
                         {"state", host.live ? "live" : host.stopped ? "stopped" : "gone"},
                         {"processing_enabled", host.enabled},
                         {"abandoned_threads", host.abandoned_threads},
                         {"schema_needed", host.schema_needed},
                         {"schema_supported_max", host.schema_supported_max},
                         {"started_at", host.started_at},
                         {"last_heartbeat_at", host.last_heartbeat_at},
                         {"handlers", handlers}});
    }
    nlohmann::json mismatches = nlohmann::json::array();
    for (const auto& mismatch : view.mismatches) {
        nlohmann::json sets = nlohmann::json::array();
        for (const auto& [names, host_ids] : mismatch.handler_sets) {
            sets.push_back({{"handlers", names}, {"hosts", host_ids}});
        }
        mismatches.push_back({{"event_type", mismatch.event_type}, {"handler_sets", sets}});
    }
    nlohmann::json plugin_mismatches = nlohmann::json::array();
    for (const auto& mismatch : view.build_mismatches) {
        nlohmann::json builds = nlohmann::json::array();
        for (const auto& [sha256, host_ids] : mismatch.builds) builds.push_back({{"sha256", sha256}, {"hosts", host_ids}});
        plugin_mismatches.push_back({{"handler", mismatch.handler}, {"builds", builds}});
    }
    return {{"hosts", hosts}, {"mismatches", mismatches}, {"plugin_mismatches", plugin_mismatches}};
}

void FleetRegistry::write(pqxx::connection& conn, bool stopping) {
    pqxx::nontransaction tx(conn);
    const double started =
        std::chrono::duration<double>(started_at_.time_since_epoch()).count();
    tx.exec_params(kUpsertSql, options_.host_id, options_.version, started,
                   static_cast<int>(options_.heartbeat_interval.count()), stopping, options_.enabled,
                   handlers_json(*handlers_.get()), options_.abandoned_threads ? options_.abandoned_threads() : 0,
                   options_.schema_needed, options_.schema_supported_max, options_.incarnation);
    if (!stopping) tx.exec_params(kForgetSql, static_cast<long long>(options_.forget_after.count()));
}

void FleetRegistry::refresh() {
    {
        std::lock_guard lock(mutex_);
        refresh_ = true;
    }
    refresh_cv_.notify_all();
}

std::optional<std::string> FleetRegistry::announce(const std::string& left_beat) {
    pqxx::result rows;
    try {
        const auto conn = db::open_connection(options_.database_url);
        // Bounded like every call (a row lock held elsewhere, a silent server): on timeout
        // the host starts and the first beat writes the row.
        db::CallGuard guard(*conn);
        pqxx::nontransaction tx(*conn);
        rows = tx.exec_params(kAnnounceSql, options_.host_id, options_.version,
                              std::chrono::duration<double>(started_at_.time_since_epoch()).count(),
                              static_cast<int>(options_.heartbeat_interval.count()), false, options_.enabled,
                              handlers_json(*handlers_.get()), 0, options_.schema_needed, options_.schema_supported_max,
                              options_.incarnation, left_beat);
    } catch (const std::exception&) {
        // The outage log and the first beat's session report a database that is away.
        return std::nullopt;
    }
    if (!rows.empty()) return std::nullopt;
    return twin_refusal(options_.host_id, "it started while this one did");
}

void FleetRegistry::run(std::stop_token stop) {
    db::DbSession session(options_.database_url, "fleet registry", outage_);
    while (!stop.stop_requested()) {
        session.run([&](pqxx::connection& conn) { write(conn, false); }, stop);
        std::unique_lock lock(mutex_);
        refresh_cv_.wait_for(lock, stop, options_.heartbeat_interval, [&] { return refresh_; });
        refresh_ = false;
    }
    // A clean stop says so at once instead of waiting to be counted as gone.
    std::stop_source never;
    session.run([&](pqxx::connection& conn) { write(conn, true); }, never.get_token());
}

}  // namespace outbox::fleet
