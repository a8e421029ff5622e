#pragma once

#include <filesystem>

namespace outbox::test {

/// Creates `parent`/plugins, empty, and returns its path.
std::filesystem::path make_plugin_dir(const std::filesystem::path& parent);

/// make_plugin_dir() holding a copy of the scripted fixture as libscripted.so: the plugin
/// directory of most tests that run `outboxd run` as a child.
std::filesystem::path scripted_plugin_dir(const std::filesystem::path& parent);

/// The documented deploy step: copy next to the target (mode 0755), then rename into place,
/// so that a watching host never sees a half-written file.
void deploy_plugin(const std::filesystem::path& from, const std::filesystem::path& to);

}  // namespace outbox::test
