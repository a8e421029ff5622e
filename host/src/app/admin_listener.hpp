#pragma once

#include <functional>
#include <memory>
#include <string>

#include "config/config.hpp"
#include "metrics/metrics.hpp"
#include "routing/handler_set.hpp"

namespace outbox::app {

/// The admin listener as the host runs it. The host builds it through an AdminFactory
/// that main() passes in, so the commands hold no HTTP code.
class AdminListener {
public:
    virtual ~AdminListener() = default;
    /// Stops accepting, finishes running requests, joins. Idempotent.
    virtual void stop() = 0;
};

/// The handlers the host routes to right now (they can be replaced at run time). Thread-safe.
using HandlerSource = std::function<std::shared_ptr<const routing::HandlerSet>()>;
/// Binds and starts serving; throws StartError(1) naming the address when it cannot bind.
using StartAdmin = std::function<std::unique_ptr<AdminListener>(metrics::Metrics&, HandlerSource)>;
/// Reads admin.* for `host_id` (throws config::ConfigError, e.g. an unreadable key file)
/// and returns what starts the listener.
using AdminFactory = std::function<StartAdmin(const config::Config& config, const std::string& host_id)>;

}  // namespace outbox::app
