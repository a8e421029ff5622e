#pragma once

#include "config/config.hpp"

namespace outbox::app {

/// `outboxd run`: load plugins, start the worker runtime, serve until SIGTERM/SIGINT, then
/// drain and exit 0. With `migrate_first`, applies pending migrations before starting.
int run_command(const config::Config& config, bool migrate_first);

/// `outboxd migrate`: applies pending migrations and reports them.
int migrate_command(const config::Config& config);

/// `outboxd status`: counts by status and type, the oldest undelivered event's age, event
/// types no handler in the fleet has claimed, and REVIEW_REQUIRED counts by code.
int status_command(const config::Config& config);

}  // namespace outbox::app
