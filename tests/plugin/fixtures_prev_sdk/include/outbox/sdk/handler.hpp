#pragma once

#include <exception>
#include <string>
#include <vector>

#include "outbox/sdk/context.hpp"
#include "outbox/sdk/errors.hpp"
#include "outbox/sdk/event.hpp"
#include "outbox/sdk/visibility.hpp"

namespace outbox::sdk {

/// A handler plugin's entry point. One instance per loaded plugin file, constructed by the
/// host through OUTBOX_PLUGIN with the plugin's config JSON.
///
/// Thread-safety: handle() is called concurrently from several host threads (up to the
/// host's `concurrency` and the handler's `max_concurrency`), each with its own Context.
/// handler_name(), event_types() and classify() may be called from any thread.
class OUTBOX_SDK_VISIBLE Handler {
public:
    virtual ~Handler() = default;

    /// Stable identity, recorded in event_consumption. Renaming it makes a new handler
    /// that will run again for every event it has not consumed. Lower-case kebab-case.
    [[nodiscard]] virtual std::string handler_name() const = 0;

    /// Event types (e.g. "WebsiteRegistered") this handler processes. Read once at load.
    [[nodiscard]] virtual std::vector<std::string> event_types() const = 0;

    /// Processes one event. Return normally on success: the host then records consumption
    /// (committing ctx.db() work with it). Throw RetryableError / NonRetryableError (or
    /// anything, see classify()) on failure. Delivery is at-least-once: the same event can
    /// arrive again after a crash or lost lease, so pass event.id as the idempotency key
    /// of remote calls and make database effects idempotent.
    virtual void handle(const Event& event, Context& ctx) = 0;

    /// Maps an exception thrown by handle() to a disposition. Called by the host inside
    /// its catch block, while the plugin is loaded. Override it to declare third-party
    /// exception types retryable or not; call the base for the rest.
    [[nodiscard]] virtual Disposition classify(const std::exception& error) const {
        if (const auto* retryable = dynamic_cast<const RetryableError*>(&error)) {
            return Disposition::retry(retryable->code(), retryable->retry_after());
        }
        if (const auto* permanent = dynamic_cast<const NonRetryableError*>(&error)) {
            return Disposition::review(permanent->code());
        }
        return Disposition::retry("UNCLASSIFIED");
    }
};

}  // namespace outbox::sdk
