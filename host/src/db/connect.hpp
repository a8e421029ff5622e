#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <pqxx/connection>

namespace outbox::db {

/// How every connection of this process is opened (database.* settings). libpq's own
/// timeouts catch a server that is down or a peer whose kernel is gone; a peer that still
/// acknowledges while nothing answers (a stopped proxy) is caught by CallGuard instead.
struct ConnectionSettings {
    std::chrono::milliseconds connect_timeout{std::chrono::seconds{5}};
    std::chrono::milliseconds keepalives_idle{std::chrono::seconds{10}};
    std::chrono::milliseconds keepalives_interval{std::chrono::seconds{5}};
    int keepalives_count = 3;
    std::chrono::milliseconds tcp_user_timeout{std::chrono::seconds{20}};
    /// The longest one database call may take before the host shuts its socket down.
    std::chrono::milliseconds call_timeout{std::chrono::seconds{10}};
    std::string application_name = "outboxd";
    /// database.pool_mode = transaction: a connection is a client of a pooler in transaction
    /// mode, whose server session may change at every transaction. Nothing then relies on
    /// session state: no named prepared statements, no session SET or `options`, no session
    /// advisory lock, no LISTEN.
    bool transaction_pooled = false;
};

/// Sets the settings every later open_connection() applies. Called once at start-up,
/// before any connection is opened; until then the defaults above apply.
void configure_connections(const ConnectionSettings& settings);
[[nodiscard]] ConnectionSettings connection_settings();

/// `url` (a postgresql:// URI or key=value conninfo, possibly with several hosts) as a
/// key=value conninfo with the settings' keys added where `url` does not set them itself:
/// an operator's explicit choice in the URL wins. Throws std::invalid_argument naming the
/// problem (never echoing the URL, which may hold a password) when libpq cannot parse it.
std::string effective_conninfo(const std::string& url, const ConnectionSettings& settings);

/// `url` as a key=value conninfo with `defaults` added for keywords it does not set, and
/// each of `server_settings` ("name=value") put in front of its libpq `options` as
/// `-c name=value` (so a setting the URL's own options name still wins). A URL naming
/// several hosts (libpq multi-host syntax, a failover pair) gets
/// `target_session_attrs=read-write` unless it sets its own. Throws like
/// effective_conninfo().
std::string conninfo_with(const std::string& url, const std::map<std::string, std::string>& defaults,
                          const std::vector<std::string>& server_settings = {});

/// The one place connections are opened: with the process' ConnectionSettings. Throws
/// pqxx::broken_connection when the server cannot be reached within connect_timeout.
std::unique_ptr<pqxx::connection> open_connection(const std::string& url);

/// Bounds one database call on `conn` by a deadline kept by the host itself: when the call
/// has not returned by then, a watchdog thread sends the server a cancel request (so no
/// backend is left waiting on a lock for a client that gave up) and, if the call has still
/// not returned 250 ms later, shuts the connection's socket down, so libpq's blocking read
/// fails at once (the connection is then broken and must be dropped). Scope it tightly
/// around the call; `conn` must outlive it.
class CallGuard {
public:
    CallGuard(pqxx::connection_base& conn, std::chrono::steady_clock::time_point deadline);
    /// Deadline: now + call_timeout.
    explicit CallGuard(pqxx::connection_base& conn);
    ~CallGuard();
    CallGuard(const CallGuard&) = delete;
    CallGuard& operator=(const CallGuard&) = delete;
    CallGuard(CallGuard&&) = delete;
    CallGuard& operator=(CallGuard&&) = delete;

    /// Whether the watchdog shut the socket down (a call its cancel request ended fails with
    /// SQLSTATE 57014 instead, and keeps its connection).
    [[nodiscard]] bool fired() const noexcept;

private:
    std::uint64_t id_ = 0;
};

}  // namespace outbox::db
