#pragma once

#include "app/admin_listener.hpp"

namespace outbox::app {

/// Parses the command line and runs one command. Exit codes: 0 success, 1 runtime
/// failure, 2 bad configuration or usage. `admin` builds `outboxd run`'s admin listener.
int run_cli(int argc, char** argv, const AdminFactory& admin);

}  // namespace outbox::app
