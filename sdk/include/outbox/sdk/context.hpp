#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "outbox/sdk/visibility.hpp"

namespace outbox::sdk {

/// One result row: each column as text, std::nullopt for SQL NULL.
using Row = std::vector<std::optional<std::string>>;
using Rows = std::vector<Row>;
/// Statement parameters ($1, $2, ...) as text; std::nullopt binds SQL NULL.
using Params = std::vector<std::optional<std::string>>;

/// The handler's own database transaction, implemented by the host.
///
/// Opened on the first call to Context::db(), on a connection taken from the host's pool
/// (no connection is held while a handler only talks to remote systems). When handle()
/// returns normally the host re-checks under a row lock that this host still owns the
/// event's lease, records the consumption (the handler's event_consumption row, or the
/// event's COMPLETED status when this attempt completes it first time) and commits
/// everything in one transaction; a stale host therefore cannot commit handler effects. When handle()
/// throws, the transaction is rolled back.
///
/// Not thread-safe: use it only from the thread that runs handle().
class OUTBOX_SDK_VISIBLE Db {
public:
    virtual ~Db() = default;

    /// Runs one SQL statement with positional parameters and returns its rows (use
    /// RETURNING to see what an UPDATE changed). Throws RetryableError("DB_UNAVAILABLE")
    /// when the connection broke, RetryableError("DB_CONFLICT") on a serialization failure
    /// or deadlock, and NonRetryableError("DB_<SQLSTATE>") for any other SQL error; after a
    /// throw the transaction is aborted and handle() should let the exception propagate.
    virtual Rows exec(std::string_view sql, const Params& params = {}) = 0;
};

enum class LogLevel { Debug, Info, Warn, Error };

/// The W3C trace context of one call (https://www.w3.org/TR/trace-context/): the
/// `traceparent` and `tracestate` headers to send with the remote calls this call makes, so
/// they join the trace of the request that published the event. Empty strings when the
/// publisher gave none. The SDK's HTTP helper and the NATS relay send them already.
struct TraceContext {
    std::string traceparent;  ///< "00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>", or empty
    std::string tracestate;   ///< vendor list, up to 512 characters; empty without a traceparent
};

/// What the host gives a handler for one call. Implemented by the host; valid only during
/// that call and only on the thread that runs handle().
class OUTBOX_SDK_VISIBLE Context {
public:
    virtual ~Context() = default;

    /// This handler's transaction (see Db), opened lazily on first use.
    virtual Db& db() = 0;

    /// True once the host has lost this event's lease (another host may now run it) or is
    /// shutting down past its drain time. A handler in a long loop or wait should check it
    /// and return or throw; its result is discarded either way. Thread-safe.
    [[nodiscard]] virtual bool cancelled() const = 0;

    /// When this call should be finished (the handler's configured `timeout`). Cap remote
    /// timeouts by it. Thread-safe.
    [[nodiscard]] virtual std::chrono::steady_clock::time_point deadline() const = 0;

    /// The plugin's own `handlers.<handler_name>.config` section of the host YAML, as JSON
    /// text ("{}" when absent). Secrets are not in it: it names environment variables.
    [[nodiscard]] virtual const std::string& config_json() const = 0;

    /// Writes one line to the host log, tagged with event_id, event_type, handler and
    /// attempt. Never pass payload values, tokens or remote response bodies.
    virtual void log(LogLevel level, std::string_view message) = 0;

    /// Since SDK 1.2: the trace context to pass on (see TraceContext). Opaque: never log it.
    /// A plugin that calls it needs a host of ABI 1.2 or later, which the manifest check
    /// enforces. Thread-safe.
    [[nodiscard]] virtual const TraceContext& trace() const = 0;

    /// Since SDK 1.3: true when this delivery is an operator's replay of an event this
    /// handler may have handled before (an operator job with action "replay" re-runs a
    /// COMPLETED or DISCARDED event for this handler alone, e.g. after a fix or to backfill
    /// a handler added later). A handler whose effects are not idempotent can decide here
    /// what to redo. A plugin that calls it needs a host of ABI 1.3 or later, which the
    /// manifest check enforces; the default (false) keeps fakes of earlier SDKs compiling.
    [[nodiscard]] virtual bool replay() const { return false; }

    /// Time left until deadline(), never negative.
    [[nodiscard]] std::chrono::milliseconds remaining() const {
        const auto left = deadline() - std::chrono::steady_clock::now();
        return left.count() > 0 ? std::chrono::duration_cast<std::chrono::milliseconds>(left)
                                : std::chrono::milliseconds{0};
    }
};

}  // namespace outbox::sdk
