#include "support/child_process.hpp"

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/temp_dir.hpp"

extern char** environ;

namespace outbox::test {

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                           const std::string& output_file) {
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) {
        const std::string entry = *e;
        const auto name = entry.substr(0, entry.find('='));
        if (!env.contains(name)) env_strings.push_back(entry);
    }
    for (const auto& [name, value] : env) env_strings.push_back(name + "=" + value);
    std::vector<char*> c_argv, c_env;
    for (const auto& arg : argv) c_argv.push_back(const_cast<char*>(arg.c_str()));
    c_argv.push_back(nullptr);
    for (const auto& entry : env_strings) c_env.push_back(const_cast<char*>(entry.c_str()));
    c_env.push_back(nullptr);

    const int out = ::open(output_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (out < 0) throw std::runtime_error("cannot open " + output_file);
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
        // The test process blocks no signals the child needs, but reset the mask anyway.
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, nullptr);
        ::dup2(out, 1);
        ::dup2(out, 2);
        ::execve(c_argv[0], c_argv.data(), c_env.data());
        ::_exit(127);
    }
    ::close(out);
}

ChildProcess::~ChildProcess() {
    if (!exit_code_) {
        ::kill(pid_, SIGKILL);
        wait(std::chrono::seconds{10});
    }
}

void ChildProcess::signal(int sig) const { ::kill(pid_, sig); }

std::optional<int> ChildProcess::wait(std::chrono::milliseconds timeout) {
    if (exit_code_) return exit_code_;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
        int status = 0;
        const pid_t done = ::waitpid(pid_, &status, WNOHANG);
        if (done == pid_) {
            exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            return exit_code_;
        }
        if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
        std::this_thread::sleep_for(std::chrono::milliseconds{20});
    }
}

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    std::stringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

std::pair<int, std::string> run_command(const std::vector<std::string>& argv,
                                        const std::map<std::string, std::string>& env,
                                        std::chrono::milliseconds timeout) {
    TempDir dir;
    const std::string output = (dir.path() / "output").string();
    ChildProcess child(argv, env, output);
    const auto code = child.wait(timeout);
    return {code.value_or(-1), read_file(output)};
}

}  // namespace outbox::test
