#pragma once

#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

namespace outbox::app {

/// One file of the `outboxd new-plugin` template: its path in the new folder and its text
/// with @NAME@, @TARGET@, @UPPER@, @CLASS@ and @EVENT@ placeholders.
struct TemplateFile {
    const char* path;
    const char* text;
};

/// The template, compiled into the binary from host/templates/new-plugin/.
const std::vector<TemplateFile>& plugin_template_files();

/// Why `name` cannot name a new plugin, or empty when it can: 1-63 characters of a-z, 0-9
/// and '-', starting with a letter, not ending with '-' (it becomes the handler name, the
/// file lib<name>.so, a CMake target and a C++ namespace).
std::string plugin_name_problem(const std::string& name);

/// `outboxd new-plugin NAME --dir DIR`: writes the template for handler NAME into DIR (created;
/// it must not exist or be empty). Returns 0, 2 for an invalid NAME or a DIR that is not
/// empty (one line on `err`), 1 when a file cannot be written.
int new_plugin_command(const std::string& name, const std::filesystem::path& dir, std::ostream& out,
                       std::ostream& err);

}  // namespace outbox::app
