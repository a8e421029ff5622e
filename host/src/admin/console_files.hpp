#pragma once

#include <string_view>
#include <vector>

namespace outbox::admin {

/// One file of the operator console (host/console), compiled into the binary.
struct ConsoleFile {
    std::string_view name;     // "index.html"
    std::string_view content;  // the file's bytes
};

/// Every console file, sorted by name (generated at build time by cmake/EmbedConsole.cmake).
const std::vector<ConsoleFile>& console_files();

}  // namespace outbox::admin
