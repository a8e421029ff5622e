#pragma once

#include <optional>
#include <string>

#include "app/admin_listener.hpp"
#include "config/config.hpp"
#include "db/migrator.hpp"
#include "registry/event_types.hpp"

namespace outbox::app {

/// `outboxd run`: load plugins, start the worker runtime, serve until SIGTERM/SIGINT, then
/// drain and exit 0. With `migrate_first`, applies pending migrations before starting;
/// `admin` builds the admin listener.
int run_command(const config::Config& config, bool migrate_first, const AdminFactory& admin);

/// `outboxd migrate [--offline]`: applies pending migrations and reports them, then grants
/// the runtime and publisher roles (given now or stored by an earlier migrate) their
/// privileges. Exit 0 when applied or up to date, 2 when a named role does not exist
/// (nothing is applied then), 4 when a pending migration would break live hosts of an older
/// release (not online) and `offline` is not set, 1 on other failures.
/// `require_registered_types` is --require-registered-types (see
/// requested_require_registered_types()).
int migrate_command(const config::Config& config, const db::RoleNames& roles, bool offline,
                    std::optional<bool> require_registered_types);

/// `outboxd status`: counts by status and type, the oldest undelivered event's age, the
/// events blocked behind an earlier event of their aggregate, event types no handler in
/// the fleet has claimed, and REVIEW_REQUIRED counts by code.
int status_command(const config::Config& config);

struct RetryArgs {
    std::string event_id;
    std::optional<long long> expected_version;
    std::string reason;
    std::string idempotency_key;
    // Bulk form (no EVENT_ID):
    std::optional<std::string> event_type;
    std::optional<std::string> code;
    std::optional<std::string> before;
    std::optional<int> limit;
};

/// `outboxd retry EVENT_ID --expected-version N ...`: re-drives one REVIEW_REQUIRED event
/// exactly as the admin API does (same service, same rules), for the event's own company,
/// with actor "cli:<OS user>". `outboxd retry --event-type T --code C [--before TS]
/// [--limit N] --reason R`: re-drives the matching REVIEW_REQUIRED events of every company
/// as POST /api/v1/admin/outbox-events/retry does; without --idempotency-key a new key is
/// made and printed. Exit 0 when accepted or replayed, 1 on conflict, unknown event,
/// invalid input or database failure, 2 on a malformed command line.
int retry_command(const config::Config& config, const RetryArgs& args);

struct OperationArgs {
    std::string action;
    std::optional<std::string> event_type;
    std::optional<std::string> code;
    bool no_code = false;
    std::optional<std::string> status;
    std::optional<std::string> after;
    std::optional<std::string> before;
    std::optional<std::string> aggregate_key;
    std::optional<std::string> handler;
    std::optional<std::string> company;
    std::string reason;
    std::string idempotency_key;
    bool dry_run = false;
    bool detach = false;
};

/// `outboxd operations start --action A [filter options] --reason R --idempotency-key K`:
/// the operator job of POST /api/v1/admin/operations (same rules, same jobs), over every
/// company unless --company; actor "cli:<OS user>". With --dry-run prints the count and a
/// sample and changes nothing. Otherwise starts the job and works its batches here until it
/// is over, printing progress (running hosts share the batches; if this command stops, they
/// finish it), or with --detach leaves it to the hosts. Exit 0 when done or previewed, 1 when
/// refused, cancelled, failed or on database failure, 2 on a malformed command line.
int operations_start_command(const config::Config& config, const OperationArgs& args);
/// `outboxd operations show ID [--format text|json]`: the job's state and progress.
int operations_show_command(const config::Config& config, const std::string& id, const std::string& format);
/// `outboxd operations cancel ID`: stops a running job after its batch in flight.
int operations_cancel_command(const config::Config& config, const std::string& id);
/// `outboxd operations list [--state S] [--limit N] [--format text|json]`: the newest jobs
/// first, every company's. Exit 0, or 1 on database failure.
int operations_list_command(const config::Config& config, const std::optional<std::string>& state, int limit,
                            const std::string& format);
/// `outboxd events show ID [--format text|json]`: an event's status and its attempts
/// (outbox_attempt), any company's. Exit 0 when shown, 1 when there is no such event or on
/// database failure.
int events_show_command(const config::Config& config, const std::string& id, const std::string& format);

/// `outboxd handlers pause|resume NAME`: pauses or resumes a handler fleet-wide (actor
/// "cli:<OS user>"). Exit 0 when done or already so, 1 on database failure, 2 on a bad name.
int handlers_command(const config::Config& config, bool pause, const std::string& name);

/// `outboxd event-types apply FILE`: applies the registry file and prints what changed;
/// exit 0, 1 on database failure, 2 on a bad file (one line naming file, key and rule).
int event_types_apply_command(const config::Config& config, const std::string& file,
                              std::optional<bool> require_registered_types);

/// What migrate and event-types apply do with the database-wide require_registered_types:
/// the explicit --require-registered-types value when given; otherwise `true` when
/// outbox.require_registered_types is true; otherwise nothing (left as it is). Only the
/// flag can switch it off.
std::optional<bool> requested_require_registered_types(const config::Config& config, std::optional<bool> flag);

/// Prints one line when the setting changed.
void report_setting(const registry::SettingChange& change);

/// `outboxd event-types list [--format text|json]`: the registry as stored.
int event_types_list_command(const config::Config& config, const std::string& format);

/// "cli:<OS user>", the actor of operator commands.
std::string cli_actor();

}  // namespace outbox::app
