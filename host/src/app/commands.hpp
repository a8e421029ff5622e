#pragma once

#include <string>

#include "config/config.hpp"
#include "db/migrator.hpp"

namespace outbox::app {

/// `outboxd run`: load plugins, start the worker runtime, serve until SIGTERM/SIGINT, then
/// drain and exit 0. With `migrate_first`, applies pending migrations before starting.
int run_command(const config::Config& config, bool migrate_first);

/// `outboxd migrate [--offline]`: applies pending migrations and reports them, then grants
/// the runtime and publisher roles (given now or stored by an earlier migrate) their
/// privileges. Exit 0 when applied or up to date, 2 when a named role does not exist
/// (nothing is applied then), 4 when a pending migration would break live hosts of an older
/// release (not online) and `offline` is not set, 1 on other failures.
int migrate_command(const config::Config& config, const db::RoleNames& roles, bool offline);

/// `outboxd status`: counts by status and type, the oldest undelivered event's age, the
/// events blocked behind an earlier event of their aggregate, event types no handler in
/// the fleet has claimed, and REVIEW_REQUIRED counts by code.
int status_command(const config::Config& config);

struct RetryArgs {
    std::string event_id;
    long long expected_version = 0;
    std::string reason;
    std::string idempotency_key;
};

/// `outboxd retry`: re-drives one REVIEW_REQUIRED event exactly as the admin API does (same
/// service, same rules), for the event's own company, with actor "cli:<OS user>". Exit 0
/// when accepted or replayed, 1 on conflict, unknown event, invalid input or database failure.
int retry_command(const config::Config& config, const RetryArgs& args);

}  // namespace outbox::app
