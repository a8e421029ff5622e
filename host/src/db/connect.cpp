#include "db/connect.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <stdexcept>
#include <stop_token>
#include <thread>
#include <vector>

#include <libpq-fe.h>

namespace outbox::db {
namespace {

std::mutex settings_mutex;
ConnectionSettings settings_value;

std::string quoted(const std::string& value) {
    std::string out = "'";
    for (const char c : value) {
        if (c == '\\' || c == '\'') out += '\\';
        out += c;
    }
    return out + "'";
}

std::string seconds_text(std::chrono::milliseconds value) {
    // libpq takes whole seconds; a sub-second setting must not become 0 (= wait forever).
    return std::to_string(std::max<long long>(1, (value.count() + 999) / 1000));
}

// libpqxx 6.4 keeps a connection's PGconn private, and libpq's PQgetCancel needs it. An
// explicit instantiation may name a private member ([temp.spec.general]): this one reads it.
using RawConnection = pqxx::internal::pq::PGconn* (pqxx::connection_base::*)() const;
struct RawConnectionTag {
    friend RawConnection raw_connection_member(RawConnectionTag);
};
template <RawConnection Member>
struct RawConnectionAccess {
    friend RawConnection raw_connection_member(RawConnectionTag) { return Member; }
};
template struct RawConnectionAccess<&pqxx::connection_base::raw_connection>;

using CancelHandle = std::shared_ptr<PGcancel>;

CancelHandle cancel_handle(const pqxx::connection_base& conn) {
    PGconn* raw = (conn.*raw_connection_member(RawConnectionTag{}))();
    PGcancel* cancel = raw == nullptr ? nullptr : PQgetCancel(raw);
    return cancel == nullptr ? nullptr : CancelHandle(cancel, PQfreeCancel);
}

/// Sends cancel requests on a thread of its own: PQcancel opens a connection and waits for
/// the server to close it, which on a silent network may take until the path answers again.
/// Detached, so a cancel stuck that way never holds up the process' exit; at most kQueued
/// requests wait behind it, later ones are dropped (their sockets are shut down anyway).
class Canceller {
public:
    static void send(CancelHandle cancel) {
        static const std::shared_ptr<Canceller> canceller = start();
        {
            std::lock_guard lock(canceller->mutex_);
            if (canceller->queue_.size() >= kQueued) return;
            canceller->queue_.push_back(std::move(cancel));
        }
        canceller->changed_.notify_one();
    }

private:
    static constexpr std::size_t kQueued = 64;

    static std::shared_ptr<Canceller> start() {
        auto canceller = std::make_shared<Canceller>();
        std::thread([canceller] { canceller->run(); }).detach();
        return canceller;
    }

    void run() {
        while (true) {
            CancelHandle next;
            {
                std::unique_lock lock(mutex_);
                changed_.wait(lock, [&] { return !queue_.empty(); });
                next = std::move(queue_.front());
                queue_.pop_front();
            }
            std::array<char, 256> error{};
            PQcancel(next.get(), error.data(), static_cast<int>(error.size()));
        }
    }

    std::mutex mutex_;
    std::condition_variable changed_;
    std::deque<CancelHandle> queue_;
};

/// Ends calls that overran their deadline: a cancel request first, so the server stops the
/// statement (a lock wait above all) instead of holding its backend until it notices the
/// client is gone; kCancelWait later, unless the call has returned meanwhile, the socket is
/// shut down. One thread per process, started on first use; it sleeps until the earliest
/// deadline.
class Watchdog {
public:
    static Watchdog& instance() {
        static Watchdog watchdog;
        return watchdog;
    }

    // The watchdog works on its own duplicate of the descriptor: shutting the duplicate
    // down ends the connection's socket, and its number can never have been reused for
    // another file meanwhile (libpq may close its own descriptor inside the call).
    std::uint64_t add(int fd, std::chrono::steady_clock::time_point deadline, CancelHandle cancel) {
        const int own = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
        if (own < 0) return 0;
        std::uint64_t id = 0;
        {
            std::lock_guard lock(mutex_);
            try {
                if (!thread_.joinable()) thread_ = std::jthread([this](std::stop_token stop) { run(stop); });
            } catch (...) {
                ::close(own);
                throw;
            }
            id = ++next_id_;
            calls_.emplace(id, Call{own, deadline, std::move(cancel), false, false});
            ++generation_;
        }
        changed_.notify_all();
        return id;
    }

    bool remove(std::uint64_t id) {
        std::lock_guard lock(mutex_);
        const auto found = calls_.find(id);
        if (found == calls_.end()) return false;
        const bool fired = found->second.fired;
        ::close(found->second.fd);
        calls_.erase(found);
        return fired;
    }

    bool fired(std::uint64_t id) {
        std::lock_guard lock(mutex_);
        const auto found = calls_.find(id);
        return found != calls_.end() && found->second.fired;
    }

private:
    // A cancelled statement ends within milliseconds; the shutdown after this wait is for
    // the server (or the path to it) that does not answer at all.
    static constexpr std::chrono::milliseconds kCancelWait{250};

    struct Call {
        int fd;
        std::chrono::steady_clock::time_point deadline;
        CancelHandle cancel;
        bool cancelled;
        bool fired;
    };

    void run(std::stop_token stop) {
        std::unique_lock lock(mutex_);
        while (!stop.stop_requested()) {
            auto next = std::chrono::steady_clock::time_point::max();
            const auto now = std::chrono::steady_clock::now();
            for (auto& [id, call] : calls_) {
                if (call.fired) continue;
                if (call.deadline <= now && call.cancel && !call.cancelled) {
                    Canceller::send(std::move(call.cancel));
                    call.cancelled = true;
                    call.deadline = now + kCancelWait;
                }
                if (call.deadline <= now) {
                    ::shutdown(call.fd, SHUT_RDWR);
                    call.fired = true;
                } else {
                    next = std::min(next, call.deadline);
                }
            }
            const std::uint64_t seen = generation_;
            const auto woken = [&] { return generation_ != seen; };
            if (next == std::chrono::steady_clock::time_point::max()) {
                changed_.wait(lock, stop, woken);
            } else {
                changed_.wait_until(lock, stop, next, woken);
            }
        }
    }

    std::mutex mutex_;
    std::condition_variable_any changed_;
    std::map<std::uint64_t, Call> calls_;
    std::uint64_t next_id_ = 0;
    std::uint64_t generation_ = 0;  // bumped by add(): an earlier deadline may have arrived
    std::jthread thread_;
};

}  // namespace

void configure_connections(const ConnectionSettings& settings) {
    std::lock_guard lock(settings_mutex);
    settings_value = settings;
}

ConnectionSettings connection_settings() {
    std::lock_guard lock(settings_mutex);
    return settings_value;
}

std::string conninfo_with(const std::string& url, const std::map<std::string, std::string>& defaults,
                          const std::vector<std::string>& server_settings) {
    char* error = nullptr;
    PQconninfoOption* options = PQconninfoParse(url.c_str(), &error);
    if (options == nullptr) {
        if (error != nullptr) PQfreemem(error);
        throw std::invalid_argument("database.url is not a valid PostgreSQL connection string or URI");
    }
    std::map<std::string, std::string> given;
    for (const PQconninfoOption* option = options; option->keyword != nullptr; ++option) {
        if (option->val != nullptr) given.emplace(option->keyword, option->val);
    }
    PQconninfoFree(options);

    for (const auto& [key, value] : defaults) given.emplace(key, value);  // the URL's own value wins
    // A failover pair (several hosts): libpq's default takes the first server that answers,
    // which may be a standby that refuses every write. Only a writable one will do.
    const auto several = [&](const char* key) {
        const auto found = given.find(key);
        return found != given.end() && found->second.find(',') != std::string::npos;
    };
    if (several("host") || several("hostaddr")) given.emplace("target_session_attrs", "read-write");
    if (!server_settings.empty()) {
        std::string ours;
        for (const auto& setting : server_settings) ours += "-c " + setting + " ";
        auto& options_value = given["options"];
        options_value = ours + options_value;
    }

    std::string conninfo;
    for (const auto& [key, value] : given) {
        if (!conninfo.empty()) conninfo += ' ';
        conninfo += key + "=" + quoted(value);
    }
    return conninfo;
}

std::string effective_conninfo(const std::string& url, const ConnectionSettings& settings) {
    return conninfo_with(url, {
                                  {"connect_timeout", seconds_text(settings.connect_timeout)},
                                  {"keepalives", "1"},
                                  {"keepalives_idle", seconds_text(settings.keepalives_idle)},
                                  {"keepalives_interval", seconds_text(settings.keepalives_interval)},
                                  {"keepalives_count", std::to_string(settings.keepalives_count)},
                                  {"tcp_user_timeout", std::to_string(settings.tcp_user_timeout.count())},
                                  {"application_name", settings.application_name.substr(0, 63)},
                              });
}

std::unique_ptr<pqxx::connection> open_connection(const std::string& url) {
    return std::make_unique<pqxx::connection>(effective_conninfo(url, connection_settings()));
}

CallGuard::CallGuard(pqxx::connection_base& conn, std::chrono::steady_clock::time_point deadline) {
    const int fd = conn.sock();
    if (fd >= 0) id_ = Watchdog::instance().add(fd, deadline, cancel_handle(conn));
}

CallGuard::CallGuard(pqxx::connection_base& conn)
    : CallGuard(conn, std::chrono::steady_clock::now() + connection_settings().call_timeout) {}

CallGuard::~CallGuard() {
    if (id_ != 0) Watchdog::instance().remove(id_);
}

bool CallGuard::fired() const noexcept {
    try {
        return id_ != 0 && Watchdog::instance().fired(id_);
    } catch (...) {
        return false;
    }
}

}  // namespace outbox::db
