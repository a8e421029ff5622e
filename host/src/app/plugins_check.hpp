#pragma once

#include <filesystem>
#include <ostream>

#include "plugin/plugin_loader.hpp"

namespace outbox::app {

/// `outboxd plugins check DIR`: loads every "*.so" in `dir` exactly as `run` would (with
/// `configs` for the config sections) and prints one row per file: FILE, HANDLER,
/// EVENT TYPES, SDK ABI, RESULT ("OK" or "error: <reason>"). Private copies go to a fresh
/// temporary directory that is removed before returning.
/// Without a config file (`config_file_given` false) a plugin whose constructor throws
/// while it has no config section is reported "OK (needs its config section ...)" with its
/// manifest's handler name and no event types: needing configuration is not a defect.
/// Returns 0 when every file loaded (or the directory has no plugins), 1 when any file
/// or the directory itself was rejected. Never throws for a bad plugin.
int plugins_check(const std::filesystem::path& dir, const plugin::HandlerConfigs& configs, std::ostream& out,
                  bool config_file_given = true);

}  // namespace outbox::app
