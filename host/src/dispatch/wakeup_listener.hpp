#pragma once

#include <memory>
#include <optional>
#include <stop_token>
#include <string>

#include "db/db_session.hpp"
#include "db/outage_log.hpp"
#include "routing/handler_set.hpp"
#include "routing/paused_handlers.hpp"

namespace outbox::dispatch {

/// The NOTIFY channel outbox_publish() signals on commit; the payload is the event type.
inline constexpr const char* kNotifyChannel = "outboxd_events";

/// Where LISTEN can go: `session_url` when set; else `url`, unless that is a pooler in
/// transaction mode (then nothing: the host polls).
std::optional<std::string> listen_url(const std::string& url, const std::string& session_url);

/// LISTENs on kNotifyChannel and wakes the scheduler when an event of a type this host
/// handles was committed, so a handler starts within milliseconds of the commit; polling
/// stays as the fallback. After a reconnect it wakes the scheduler once, since
/// notifications sent while disconnected are gone. It also LISTENs on
/// kHandlerNotifyChannel: a pause or resume marks the paused set stale and wakes the
/// scheduler, which re-reads it (so a pause reaches every host within milliseconds).
class WakeupListener {
public:
    /// Without a url it only says once that this host polls, and returns.
    WakeupListener(std::optional<std::string> url, db::OutageLog& outage, db::Wakeup& wakeup, const routing::CurrentHandlers& handlers,
                   routing::PausedHandlers& paused)
        : url_(std::move(url)), outage_(outage), wakeup_(wakeup), handlers_(handlers), paused_(paused) {}

    void run(std::stop_token stop);

private:
    std::optional<std::string> url_;
    db::OutageLog& outage_;
    db::Wakeup& wakeup_;
    const routing::CurrentHandlers& handlers_;
    routing::PausedHandlers& paused_;
};

}  // namespace outbox::dispatch
