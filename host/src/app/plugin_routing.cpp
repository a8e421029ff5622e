#include "app/plugin_routing.hpp"

#include "log/log.hpp"

namespace outbox::app {
namespace {
std::string joined(const std::vector<std::string>& items) {
    std::string text;
    for (const auto& item : items) text += (text.empty() ? "" : ",") + item;
    return text;
}
}  // namespace

std::shared_ptr<const routing::HandlerSet> handler_set_from(const std::vector<plugin::LoadedPlugin>& plugins,
                                                             const SettingsLookup& settings) {
    std::vector<routing::HandlerEntry> entries;
    entries.reserve(plugins.size());
    for (const auto& plugin : plugins) {
        entries.push_back(routing::HandlerEntry{plugin.handler_name, plugin.event_types, plugin.handler,
                                                routing::resolve(settings(plugin.handler_name)), plugin.file,
                                                plugin.abi, plugin.sha256});
    }
    return std::make_shared<const routing::HandlerSet>(std::move(entries));
}

void report_change(const plugin::DirectoryChange& change, metrics::Metrics& metrics) {
    for (const auto& plugin : change.added) {
        log::info("plugin loaded: handler " + plugin.handler_name + " for " + joined(plugin.event_types) + ", ABI " +
                      plugin.abi + ", sha256 " + plugin.sha256.substr(0, 12),
                  {.handler = plugin.handler_name, .file = plugin.file.string()});
    }
    for (const auto& plugin : change.replaced) {
        log::info("plugin replaced: new claims of " + joined(plugin.event_types) + " go to the new version of " +
                      plugin.handler_name + " (ABI " + plugin.abi + ", sha256 " + plugin.sha256.substr(0, 12) +
                      "); calls in flight finish on the old one",
                  {.handler = plugin.handler_name, .file = plugin.file.string()});
    }
    for (const auto& name : change.removed) {
        log::info("plugin removed: handler " + name + " gets no new events; calls in flight finish", {.handler = name});
    }
    for (const auto& rejected : change.rejected) {
        log::error("plugin rejected: " + rejected.reason, {.file = rejected.file.string()});
    }
    metrics.plugin_load_failures(change.rejected.size());
}

}  // namespace outbox::app
