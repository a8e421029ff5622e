#pragma once

namespace outbox::app {

/// Parses the command line and runs one command. Exit codes: 0 success, 1 runtime
/// failure, 2 bad configuration or usage.
int run_cli(int argc, char** argv);

}  // namespace outbox::app
