#include "app/host_identity.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>

#include <stdlib.h>
#include <unistd.h>

namespace outbox::app {

std::string host_identity(const std::string& configured) {
    if (!configured.empty()) return configured;
    char name[256] = {};
    if (gethostname(name, sizeof name - 1) != 0) name[0] = '\0';
    return std::string(name[0] != '\0' ? name : "host") + ":" + std::to_string(getpid());
}

PrivateDir::PrivateDir() {
    const std::filesystem::path base = std::filesystem::temp_directory_path();
    std::string pattern = (base / "outboxd-plugins-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
        throw std::runtime_error("cannot create a private plugin directory in " + base.string() + ": " +
                                 std::strerror(errno) + " (set TMPDIR to a writable directory)");
    }
    path_ = pattern;
}

PrivateDir::~PrivateDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
}

}  // namespace outbox::app
