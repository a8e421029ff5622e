#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

namespace outbox::test {

/// A child process (fork + execve) with extra environment variables and stdout/stderr
/// sent to a file. Killed with SIGKILL on destruction if still running.
class ChildProcess {
public:
    ChildProcess(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                 const std::string& output_file);
    ~ChildProcess();
    ChildProcess(const ChildProcess&) = delete;
    ChildProcess& operator=(const ChildProcess&) = delete;

    void signal(int sig) const;
    /// Waits up to `timeout` for exit; returns the exit code (128 + signal when killed), or
    /// nullopt if it is still running.
    std::optional<int> wait(std::chrono::milliseconds timeout);
    [[nodiscard]] pid_t pid() const noexcept { return pid_; }

private:
    pid_t pid_ = -1;
    std::optional<int> exit_code_;
};

/// Runs a command to completion (bounded by `timeout`) and returns (exit code, output).
std::pair<int, std::string> run_command(const std::vector<std::string>& argv,
                                        const std::map<std::string, std::string>& env,
                                        std::chrono::milliseconds timeout = std::chrono::seconds{60});

std::string read_file(const std::string& path);

}  // namespace outbox::test
