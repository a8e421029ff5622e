#include "app/cli.hpp"

namespace outbox::app {
int run_cli(int, char**) { return 0; }
}  // namespace outbox::app
