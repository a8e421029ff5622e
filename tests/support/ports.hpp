#pragma once

namespace outbox::test {

/// A listening TCP socket on 127.0.0.1 (no SO_REUSEPORT) that holds an ephemeral port busy
/// until destroyed. Throws std::runtime_error when no port can be bound.
class HeldPort {
public:
    HeldPort();
    [[nodiscard]] int port() const noexcept { return port_; }

    ~HeldPort();
    HeldPort(const HeldPort&) = delete;
    HeldPort& operator=(const HeldPort&) = delete;

private:
    int fd_ = -1;
    int port_ = 0;
};

/// A TCP port on 127.0.0.1 where nothing listens: held, then released.
int free_port();

}  // namespace outbox::test
