#include "dispatch/wakeup_listener.hpp"

#include <algorithm>
#include <optional>

#include "db/connect.hpp"
#include "log/log.hpp"

#include <pqxx/notification>

namespace outbox::dispatch {
namespace {
class Receiver final : public pqxx::notification_receiver {
public:
    Receiver(pqxx::connection_base& conn, const routing::CurrentHandlers& handlers, db::Wakeup& wakeup)
        : pqxx::notification_receiver(conn, kNotifyChannel), handlers_(handlers), wakeup_(wakeup) {}

    void operator()(const std::string& payload, int /*backend_pid*/) override {
        const auto handlers = handlers_.get();
        const auto& types = handlers->event_types();
        if (std::binary_search(types.begin(), types.end(), payload)) wakeup_.notify();
    }

private:
    const routing::CurrentHandlers& handlers_;
    db::Wakeup& wakeup_;
};
// Pause and resume: the scheduler re-reads the paused set before its next claim.
class PauseReceiver final : public pqxx::notification_receiver {
public:
    PauseReceiver(pqxx::connection_base& conn, routing::PausedHandlers& paused, db::Wakeup& wakeup)
        : pqxx::notification_receiver(conn, routing::kHandlerNotifyChannel), paused_(paused), wakeup_(wakeup) {}

    void operator()(const std::string& /*payload*/, int /*backend_pid*/) override {
        paused_.mark_stale();
        wakeup_.notify();
    }

private:
    routing::PausedHandlers& paused_;
    db::Wakeup& wakeup_;
};
}  // namespace

std::optional<std::string> listen_url(const std::string& url, const std::string& session_url) {
    if (!session_url.empty()) return session_url;
    if (db::connection_settings().transaction_pooled) return std::nullopt;
    return url;
}

void WakeupListener::run(std::stop_token stop) {
    if (!url_) {
        // A LISTEN through a transaction-mode pooler would hold a server connection's
        // session (and hear nothing once the pooler moves this client to another one).
        log::warn("database.pool_mode is transaction and database.session_url is not set: this host does not "
                  "LISTEN and finds new events by polling every outbox.poll_interval");
        return;
    }
    db::ReconnectBackoff backoff;
    while (!stop.stop_requested()) {
        try {
            auto conn = db::open_connection(*url_);
            // Bounds the receiver's LISTEN, and its UNLISTEN when it is destroyed (declared
            // before it, so destroyed after it): a silent server must not hold a stop.
            std::optional<db::CallGuard> guard;
            guard.emplace(*conn);
            Receiver receiver(*conn, handlers_, wakeup_);
            PauseReceiver pause_receiver(*conn, paused_, wakeup_);
            conn->get_notifs();  // sends LISTEN
            guard.reset();
            // libpqxx swallows a failed LISTEN: a connection the guard closed is not a recovery.
            if (!conn->is_open()) throw pqxx::broken_connection("LISTEN got no answer");
            outage_.succeeded();
            backoff.reset();
            paused_.mark_stale();  // pauses and resumes while disconnected were not heard
            wakeup_.notify();
            while (!stop.stop_requested()) conn->await_notification(0, 200'000);
            guard.emplace(*conn, std::chrono::steady_clock::now() + std::chrono::seconds{1});
        } catch (...) {
            const db::DbFailure failure = db::classify_db_error(std::current_exception());
            outage_.failed("wake-up listener", failure);
            db::sleep_for(backoff.next(), stop);
        }
    }
}

}  // namespace outbox::dispatch
