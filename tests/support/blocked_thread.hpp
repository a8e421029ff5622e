#pragma once
// Header-only, for the unit tier too: a test that must act only once another thread is
// blocked (in a condition wait, a join) asks the kernel for that thread's state instead of
// sleeping and hoping it got there.

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace outbox::test {

/// The calling thread's id, to hand to wait_until_blocked() from another thread.
inline pid_t current_thread_id() { return gettid(); }

/// True once thread `tid` of this process sleeps (state S: a futex wait, a join); false if it
/// ended or did not sleep by `timeout`. Busy-polls with yields, so it never waits longer than needed.
inline bool wait_until_blocked(pid_t tid, std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    const std::string path = "/proc/self/task/" + std::to_string(tid) + "/stat";
    while (std::chrono::steady_clock::now() < deadline) {
        std::ifstream file(path);
        if (!file) return false;  // the thread has ended
        std::stringstream text;
        text << file.rdbuf();
        const std::string stat = text.str();
        // "tid (comm) S ...": the name may hold spaces and parentheses, the state follows the last ')'.
        const auto name_end = stat.rfind(')');
        if (name_end != std::string::npos && name_end + 2 < stat.size() && stat[name_end + 2] == 'S') return true;
        std::this_thread::yield();
    }
    return false;
}

/// A thread id published by the thread itself, for the thread that waits on it.
class ThreadIdSlot {
public:
    void publish() {
        id_.store(current_thread_id());
        id_.notify_all();
    }
    pid_t wait() const {
        id_.wait(0);
        return id_.load();
    }

private:
    std::atomic<pid_t> id_{0};
};

}  // namespace outbox::test
