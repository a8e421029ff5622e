#pragma once

#include <cstdint>

#include "config/config.hpp"

namespace outbox::app {

/// File descriptors a host may hold at once with `config`: admin connections and probe
/// places, database connections, plugin files, handler sockets and a margin.
std::uint64_t descriptors_needed(const config::Config& config, std::uint64_t plugin_files);

/// Raises RLIMIT_NOFILE's soft limit to its hard limit, so a connection flood meets the
/// admin caps before the process runs out of descriptors (where database reconnects and
/// plugin loads would fail). Throws StartError (exit 2) when even the hard limit cannot
/// hold descriptors_needed(). Returns the soft limit now in force.
std::uint64_t ensure_descriptor_limit(const config::Config& config);

}  // namespace outbox::app
