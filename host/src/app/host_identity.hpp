#pragma once

#include <string>

namespace outbox::app {

/// outbox.host_id when set, otherwise "<hostname>:<pid>": unique per process, readable in
/// lease_owner.
std::string host_identity(const std::string& configured);

/// A private directory for plugin copies, removed by the destructor.
class PrivateDir {
public:
    PrivateDir();
    ~PrivateDir();
    PrivateDir(const PrivateDir&) = delete;
    PrivateDir& operator=(const PrivateDir&) = delete;
    [[nodiscard]] const std::string& path() const noexcept { return path_; }

private:
    std::string path_;
};

}  // namespace outbox::app
