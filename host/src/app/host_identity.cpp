#include "app/host_identity.hpp"

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
    std::string pattern = (std::filesystem::temp_directory_path() / "outboxd-plugins-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("cannot create a private plugin directory");
    path_ = pattern;
}

PrivateDir::~PrivateDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
}

}  // namespace outbox::app
