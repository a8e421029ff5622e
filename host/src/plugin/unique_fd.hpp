#pragma once

#include <string>
#include <system_error>

#include <unistd.h>

namespace outbox::plugin {

/// Closes a file descriptor on scope exit.
class UniqueFd {
public:
    explicit UniqueFd(int fd = -1) noexcept : fd_(fd) {}
    ~UniqueFd() { reset(); }
    UniqueFd(const UniqueFd&) = delete;
    UniqueFd& operator=(const UniqueFd&) = delete;
    [[nodiscard]] int get() const noexcept { return fd_; }
    void reset(int fd = -1) noexcept {
        if (fd_ >= 0) ::close(fd_);
        fd_ = fd;
    }

private:
    int fd_;
};

inline std::string errno_text(int error) { return std::error_code(error, std::generic_category()).message(); }

}  // namespace outbox::plugin
