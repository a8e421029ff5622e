#pragma once

#include <chrono>
#include <functional>
#include <condition_variable>
#include <mutex>
#include <map>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <pqxx/connection>

#include "db/outage_log.hpp"
#include "routing/handler_set.hpp"

namespace outbox::fleet {

/// One handler as a host reports it.
struct HostHandler {
    std::string handler;
    std::vector<std::string> event_types;
    std::string file;
    std::string abi;
    std::string sha256;  // of the plugin file as loaded; empty from a release that does not report it
};

/// One row of outbox_host, as read back.
struct HostRecord {
    std::string host_id;
    std::string version;
    std::string started_at;
    std::string last_heartbeat_at;
    double seconds_since_heartbeat = 0;
    bool live = false;      // heartbeat within 3 intervals and not stopped
    bool stopped = false;   // shut down cleanly
    bool enabled = true;
    int abandoned_threads = 0;  // handler threads abandoned past their deadline, not returned
    int schema_needed = 0;      // 0: a release that does not record it (before V12)
    int schema_supported_max = 0;
    std::vector<HostHandler> handlers;
};

/// An event type whose handler sets differ between live hosts: handler names -> host ids.
struct Mismatch {
    std::string event_type;
    std::map<std::set<std::string>, std::vector<std::string>> handler_sets;
};

/// A handler that live hosts run from different plugin builds: SHA-256 -> host ids.
struct BuildMismatch {
    std::string handler;
    std::map<std::string, std::vector<std::string>> builds;
};

struct FleetView {
    std::vector<HostRecord> hosts;  // live first, then gone, each by host_id
    std::vector<Mismatch> mismatches;
    std::vector<BuildMismatch> build_mismatches;
};

/// "0.2.0 on 2 live hosts (schema 12); 0.1.0 on 1 live host (schema unrecorded)", newest
/// schema first; "no live host" when there is none.
std::string release_summary(const FleetView& view);

/// What the start-up check saw under this host id.
struct TwinCheck {
    /// Another live process (a row not stopped, of another incarnation, whose heartbeat
    /// moved on while this watched, at most about one and a half of its intervals): a
    /// one-line description of it.
    std::optional<std::string> live;
    /// The heartbeat of a row that looked live but did not move (its process died): this
    /// process takes the id over only while the row still shows it. Empty when no row.
    std::string left_beat;
};
TwinCheck find_live_twin(pqxx::connection& conn, const std::string& host_id, const std::string& incarnation,
                         const std::stop_token& stop);

/// Reads the registry. Hosts silent for more than 3 of their heartbeat intervals are gone.
FleetView read_fleet(pqxx::connection& conn);

/// {"hosts": [{host_id, version, state, started_at, last_heartbeat_at, handlers: [...]}],
///  "mismatches": [{"event_type", "handler_sets": [{"handlers": [...], "hosts": [...]}]}],
///  "plugin_mismatches": [{"handler", "builds": [{"sha256", "hosts": [...]}]}]}
nlohmann::json to_json(const FleetView& view);

/// Keeps this host's row in outbox_host up to date: written at start, on every
/// heartbeat_interval and whenever the handler set changes; marked stopped on a clean
/// shutdown. Also deletes rows of hosts gone for longer than `forget_after`.
class FleetRegistry {
public:
    struct Options {
        std::string database_url;
        std::string host_id;
        std::string version;
        bool enabled = true;
        std::chrono::milliseconds heartbeat_interval{5000};
        std::chrono::milliseconds forget_after{std::chrono::hours{24}};
        std::function<int()> abandoned_threads;  // reported with every beat
        int schema_needed = 0;                     // the highest migration this release uses
        int schema_supported_max = 0;              // the database schema it checked at start
        std::string incarnation{};                 // this process's (RuntimeOptions::incarnation)
    };

    FleetRegistry(Options options, db::OutageLog& outage, const routing::CurrentHandlers& handlers)
        : options_(std::move(options)), outage_(outage), handlers_(handlers),
          started_at_(std::chrono::system_clock::now()) {}

    /// Writes the row once, before the host claims anything, so that a process started
    /// under this id later finds it. The write takes the id only if no other process wrote
    /// the row since find_live_twin() looked (`left_beat` is what it saw): two processes
    /// started at one moment both pass the check, and the second to write is refused with
    /// a one-line reason. Nothing when written, or when the database could not be written
    /// (run() writes the row at its first beat then).
    std::optional<std::string> announce(const std::string& left_beat);
    void run(std::stop_token stop);
    /// Writes the row now (after a handler change) instead of at the next beat.
    void refresh();

private:
    void write(pqxx::connection& conn, bool stopping);

    Options options_;
    db::OutageLog& outage_;
    const routing::CurrentHandlers& handlers_;
    std::chrono::system_clock::time_point started_at_;
    std::mutex mutex_;
    std::condition_variable_any refresh_cv_;
    bool refresh_ = false;
};

}  // namespace outbox::fleet
