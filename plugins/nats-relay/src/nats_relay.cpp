// nats-relay: relays events to a NATS JetStream stream, each exactly once within the
// stream's duplicate window.
//
// For each configured event type: one message on <subject_template> (default
// outbox.<company>.<event_type>) whose body is the event as JSON, with the header
// Nats-Msg-Id = event id. JetStream stores a message id once per duplicate window, so a
// redelivered event (lost acknowledgement, crashed host, lost lease) is acknowledged as a
// duplicate and not stored again. handle() returns only after the stream acknowledged the
// message, so an event completes only once it is stored; the host runs the events of one
// aggregate one after another, so they are stored in publish order. The publisher's trace
// context, when it gave one, travels as the headers traceparent and tracestate.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <dlfcn.h>
#include <nats/nats.h>

#include <outbox/sdk.hpp>

#include "settings.hpp"

namespace nats_relay {
namespace {

using outbox::sdk::NonRetryableError;
using outbox::sdk::RetryableError;
using std::chrono::milliseconds;

constexpr const char* kClientName = "outboxd-nats-relay";
constexpr int64_t kReconnectWaitMs = 250;

// libnats starts threads of its own (timers, per-connection readers) that outlive a
// connection's destruction by a little; the host may unload this plugin at any time, and
// with it the last reference to libnats. Pinning libnats keeps their code mapped.
void keep_libnats_loaded() {
    static std::once_flag once;
    std::call_once(once, [] {
        Dl_info info{};
        if (dladdr(reinterpret_cast<void*>(&natsConnection_Connect), &info) != 0 && info.dli_fname != nullptr) {
            (void)dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
        }
    });
}

std::string rfc3339(std::chrono::system_clock::time_point when) {
    const auto micros = std::chrono::floor<std::chrono::microseconds>(when);
    const std::time_t seconds = std::chrono::system_clock::to_time_t(std::chrono::floor<std::chrono::seconds>(micros));
    std::tm utc{};
    gmtime_r(&seconds, &utc);
    char text[96];
    const auto fraction = (micros.time_since_epoch() % std::chrono::seconds{1}).count();
    std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", utc.tm_year + 1900, utc.tm_mon + 1,
                  utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, static_cast<long long>(fraction));
    return text;
}

// The payload is spliced in as the host gave it, so numbers keep their exact text.
std::string message_body(const outbox::sdk::Event& event, const std::optional<std::string>& position) {
    const auto text = [](const std::string& value) { return nlohmann::json(value).dump(); };
    std::string body = "{\"id\":" + text(event.id) + ",\"type\":" + text(event.type) +
                       ",\"company\":" + text(event.company_id) +
                       ",\"aggregate_key\":" + (event.aggregate_key.empty() ? "null" : text(event.aggregate_key)) +
                       ",\"aggregate_position\":" + (position ? *position : std::string("null")) +
                       ",\"occurred_at\":" + text(rfc3339(event.occurred_at)) + ",\"payload\":" + event.payload_json + "}";
    return body;
}

int64_t wait_ms(milliseconds left) { return std::max<int64_t>(1, left.count()); }

/// The client's connection, made on first use and then kept: once connected, libnats
/// reconnects by itself, for ever, after a server restart. A first connect that fails is
/// tried again by a later call (one at a time, at most every kRetryConnect); other calls
/// wait for it within their own time. Thread-safe (libnats connections and JetStream contexts are).
class Connection {
public:
    explicit Connection(const Settings& settings) : settings_(settings) {}
    ~Connection() { close(); }
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;
    Connection(Connection&&) = delete;
    Connection& operator=(Connection&&) = delete;

    /// The JetStream context of a connected client; throws RetryableError while there is no
    /// connection to any server. `left`: the time this call may spend connecting.
    jsCtx* connected(milliseconds left) {
        {
            std::unique_lock lock(mutex_);
            // Another call's connect in progress may succeed within this call's time.
            connected_.wait_for(lock, left, [this] { return !connecting_; });
            if (nc_ != nullptr && natsConnection_Status(nc_) == NATS_CONN_STATUS_CLOSED) close();
            if (nc_ != nullptr) {
                if (natsConnection_Status(nc_) == NATS_CONN_STATUS_CONNECTED) return js_;
                // Nothing is handed to the client while it is disconnected: its reconnect
                // buffer would send the message later, perhaps after a later event of the
                // same aggregate was stored.
                const char* ignored = nullptr;
                if (natsConnection_GetLastError(nc_, &ignored) == NATS_CONNECTION_AUTH_FAILED) {
                    throw RetryableError("NATS_AUTH_FAILED", "the server refused the credentials");
                }
                throw RetryableError("CONNECT_FAILED", "not connected to any NATS server");
            }
            if (connecting_ || std::chrono::steady_clock::now() < next_connect_) {
                throw RetryableError("CONNECT_FAILED", "not connected to any NATS server");
            }
            connecting_ = true;
        }
        natsConnection* nc = nullptr;
        jsCtx* js = nullptr;
        const natsStatus s = open(left, nc, js);
        const std::lock_guard lock(mutex_);
        connecting_ = false;
        connected_.notify_all();
        if (s == NATS_OK) {
            nc_ = nc;
            js_ = js;
            return js_;
        }
        next_connect_ = std::chrono::steady_clock::now() + kRetryConnect;
        if (s == NATS_CONNECTION_AUTH_FAILED) throw RetryableError("NATS_AUTH_FAILED", "the server refused the credentials");
        throw RetryableError("CONNECT_FAILED", "cannot connect to any NATS server");
    }

private:
    static constexpr milliseconds kRetryConnect{250};
    static constexpr milliseconds kMaxConnectTimeout{2000};

    void close() {
        if (js_ != nullptr) jsCtx_Destroy(js_);
        if (nc_ != nullptr) natsConnection_Destroy(nc_);
        js_ = nullptr;
        nc_ = nullptr;
    }

    natsStatus open(milliseconds left, natsConnection*& nc, jsCtx*& js) const {
        natsOptions* options = nullptr;
        if (natsOptions_Create(&options) != NATS_OK) return NATS_NO_MEMORY;
        const std::unique_ptr<natsOptions, void (*)(natsOptions*)> owned(options, natsOptions_Destroy);
        std::vector<const char*> servers;
        for (const auto& url : settings_.servers) servers.push_back(url.c_str());
        // Each server is tried in turn: together they must fit in the call's time.
        const auto per_server = std::clamp(left / static_cast<long>(servers.size()), milliseconds{1}, kMaxConnectTimeout);
        natsStatus s = natsOptions_SetServers(options, servers.data(), static_cast<int>(servers.size()));
        if (s == NATS_OK) s = natsOptions_SetName(options, kClientName);
        if (s == NATS_OK && !settings_.token.empty()) s = natsOptions_SetToken(options, settings_.token.c_str());
        if (s == NATS_OK && !settings_.credentials_file.empty()) {
            s = natsOptions_SetUserCredentialsFromFiles(options, settings_.credentials_file.c_str(), nullptr);
        }
        if (s == NATS_OK) s = natsOptions_SetTimeout(options, per_server.count());
        if (s == NATS_OK) s = natsOptions_SetAllowReconnect(options, true);
        if (s == NATS_OK) s = natsOptions_SetMaxReconnect(options, -1);
        if (s == NATS_OK) s = natsOptions_SetReconnectWait(options, kReconnectWaitMs);
        if (s == NATS_OK) s = natsConnection_Connect(&nc, options);
        if (s != NATS_OK) return s;
        s = natsConnection_JetStream(&js, nc, nullptr);
        if (s != NATS_OK) {
            natsConnection_Destroy(nc);
            nc = nullptr;
        }
        return s;
    }

    const Settings& settings_;
    std::mutex mutex_;
    std::condition_variable connected_;  // a connect attempt ended
    natsConnection* nc_ = nullptr;
    jsCtx* js_ = nullptr;
    bool connecting_ = false;
    std::chrono::steady_clock::time_point next_connect_{};
};

}  // namespace

class NatsRelay final : public outbox::sdk::Handler {
public:
    /// Throws InvalidConfig for a missing or bad key, an unset token variable or an
    /// unreadable credentials file; connects to nothing (the first event does).
    explicit NatsRelay(const std::string& config_json) : settings_(parse_settings(config_json)), connection_(settings_) {
        keep_libnats_loaded();
    }

    [[nodiscard]] std::string handler_name() const override { return "nats-relay"; }
    [[nodiscard]] std::vector<std::string> event_types() const override { return settings_.event_types; }

    void handle(const outbox::sdk::Event& event, outbox::sdk::Context& ctx) override {
        const auto subject = render_subject(settings_.subject_template, event.company_id, event.type);
        if (!subject) {
            throw NonRetryableError("NATS_BAD_SUBJECT", "the company id cannot be a NATS subject token");
        }
        if (nlohmann::json::parse(event.payload_json, nullptr, false).is_discarded()) {
            throw NonRetryableError("BAD_PAYLOAD", "the payload is not JSON");
        }
        // The position is not part of the SDK's event; reading it opens this handler's
        // transaction, so only keyed events (the only ones that have one) pay for it.
        std::optional<std::string> position;
        if (!event.aggregate_key.empty()) {
            const auto rows = ctx.db().exec("SELECT aggregate_seq FROM event_publication WHERE event_id = $1::uuid",
                                            {event.id});
            if (!rows.empty() && !rows[0].empty()) position = rows[0][0];
        }
        const std::string body = message_body(event, position);

        if (ctx.cancelled()) throw RetryableError("CANCELLED", "the call was cancelled before the publish");
        // publish_timeout bounds connect and acknowledgement together, capped by the deadline.
        using Clock = std::chrono::steady_clock;
        const Clock::time_point until = Clock::now() + std::min(settings_.publish_timeout, ctx.remaining());
        const auto left = [&] { return std::chrono::duration_cast<milliseconds>(until - Clock::now()); };
        if (left().count() <= 0) throw RetryableError("TIMEOUT", "no time left before the deadline");
        jsCtx* js = connection_.connected(left());
        if (left().count() <= 0) throw RetryableError("TIMEOUT", "no time left after connecting");
        publish(js, *subject, event.id, body, left(), ctx);
    }

private:
    void publish(jsCtx* js, const std::string& subject, const std::string& id, const std::string& body,
                 milliseconds left, outbox::sdk::Context& ctx) const {
        natsMsg* raw = nullptr;
        if (natsMsg_Create(&raw, subject.c_str(), nullptr, body.data(), static_cast<int>(body.size())) != NATS_OK) {
            throw RetryableError("NATS_ERROR", "cannot create the message");
        }
        const std::unique_ptr<natsMsg, void (*)(natsMsg*)> msg(raw, natsMsg_Destroy);
        natsMsgHeader_Set(msg.get(), "Content-Type", "application/json");
        // The publisher's trace context, so a consumer of the stream joins its trace.
        if (const outbox::sdk::TraceContext& trace = ctx.trace(); !trace.traceparent.empty()) {
            natsMsgHeader_Set(msg.get(), "traceparent", trace.traceparent.c_str());
            if (!trace.tracestate.empty()) natsMsgHeader_Set(msg.get(), "tracestate", trace.tracestate.c_str());
        }

        jsPubOptions options;
        jsPubOptions_Init(&options);
        options.MsgId = id.c_str();                      // header Nats-Msg-Id
        options.ExpectStream = settings_.stream.c_str();  // header Nats-Expected-Stream
        options.MaxWait = wait_ms(left);
        jsPubAck* ack = nullptr;
        jsErrCode code = static_cast<jsErrCode>(0);
        const natsStatus s = js_PublishMsg(&ack, js, msg.get(), &options, &code);
        if (s == NATS_OK) {
            if (ack != nullptr && ack->Duplicate) ctx.log(outbox::sdk::LogLevel::Debug, "already in the stream (duplicate message id)");
            jsPubAck_Destroy(ack);
            return;
        }
        fail(js, subject, s, code, left);
    }

    [[noreturn]] void fail(jsCtx* js, const std::string& subject, natsStatus s, jsErrCode code, milliseconds left) const {
        switch (s) {
            case NATS_TIMEOUT:
                throw RetryableError("TIMEOUT", "no publish acknowledgement before the timeout");
            case NATS_NO_RESPONDERS:
                no_stream(js, subject, left);
            case NATS_MAX_PAYLOAD:
                throw NonRetryableError("NATS_MESSAGE_TOO_LARGE", "the message exceeds the server's max_payload");
            case NATS_CONNECTION_CLOSED:
            case NATS_CONNECTION_DISCONNECTED:
            case NATS_IO_ERROR:
            case NATS_STALE_CONNECTION:
                // The server may have stored it: the retry is then a duplicate.
                throw RetryableError("CONNECTION_LOST", "the connection broke before the acknowledgement");
            case NATS_NOT_YET_CONNECTED:
            case NATS_NO_SERVER:
            case NATS_INSUFFICIENT_BUFFER:
                throw RetryableError("CONNECT_FAILED", "not connected to any NATS server");
            case NATS_ERR:
                break;
            default:
                throw RetryableError("NATS_ERROR", "the client failed to publish");
        }
        // JetStream refused the message. These refusals do not change by retrying;
        // anything else (storage, limits, leadership) may.
        switch (static_cast<int>(code)) {
            case 0:
                throw RetryableError("NATS_ERROR", "the server answered with an error");
            case JSStreamMessageExceedsMaximumErr:
                throw NonRetryableError("NATS_MESSAGE_TOO_LARGE", "the message exceeds the stream's max_msg_size");
            case JSStreamNotMatchErr:
                throw NonRetryableError("NATS_WRONG_STREAM", "the subject belongs to another stream");
            case JSStreamSealedErr:
                throw NonRetryableError("NATS_STREAM_SEALED", "the stream is sealed");
            default:
                throw RetryableError("NATS_JS_" + std::to_string(static_cast<int>(code)), "JetStream refused the message");
        }
    }

    // No stream answered for the subject: a stream that exists and does not cover the
    // subject will never take it; anything else (JetStream starting, the stream not created
    // yet) may pass.
    [[noreturn]] void no_stream(jsCtx* js, const std::string& subject, milliseconds left) const {
        jsOptions options;
        jsOptions_Init(&options);
        options.Wait = wait_ms(left);
        jsStreamInfo* info = nullptr;
        jsErrCode code = static_cast<jsErrCode>(0);
        const natsStatus s = js_GetStreamInfo(&info, js, settings_.stream.c_str(), &options, &code);
        if (s != NATS_OK) {
            if (code == JSStreamNotFoundErr) throw RetryableError("NATS_STREAM_NOT_FOUND", "the stream does not exist");
            throw RetryableError("NATS_NO_RESPONDERS", "no JetStream stream answered");
        }
        bool covered = false;
        for (int i = 0; info->Config != nullptr && i < info->Config->SubjectsLen; ++i) {
            covered = covered || subject_matches(info->Config->Subjects[i], subject);
        }
        jsStreamInfo_Destroy(info);
        if (!covered) throw NonRetryableError("NATS_SUBJECT_NOT_IN_STREAM", "the stream's subjects do not cover the subject");
        throw RetryableError("NATS_NO_RESPONDERS", "the stream did not answer");
    }

    const Settings settings_;
    mutable Connection connection_;
};

}  // namespace nats_relay

OUTBOX_PLUGIN(nats_relay::NatsRelay, "nats-relay");
