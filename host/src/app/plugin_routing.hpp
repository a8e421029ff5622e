#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "metrics/metrics.hpp"
#include "plugin/plugin_directory.hpp"
#include "routing/handler_set.hpp"

namespace outbox::app {

using SettingsLookup = std::function<config::HandlerSettings(const std::string& handler_name)>;

/// The routing table for `plugins`, each with its settings.
std::shared_ptr<const routing::HandlerSet> handler_set_from(const std::vector<plugin::LoadedPlugin>& plugins,
                                                             const SettingsLookup& settings);

/// One log line per added, replaced, removed and rejected plugin; rejections are counted
/// in plugin load failures.
void report_change(const plugin::DirectoryChange& change, metrics::Metrics& metrics);

}  // namespace outbox::app
