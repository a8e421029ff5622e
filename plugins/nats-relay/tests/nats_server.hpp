#pragma once
// A real nats-server with JetStream for the nats-relay tests: on 127.0.0.1, a free port, a
// store directory of its own, stopped by its pid. And a small JetStream client to set up
// streams and read back what the plugin stored.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nats/nats.h>

#include "support/child_process.hpp"
#include "support/temp_dir.hpp"

namespace outbox::test {

class NatsServer {
public:
    /// `token`: when not empty, clients must present it.
    explicit NatsServer(std::string token = {});
    ~NatsServer();
    NatsServer(const NatsServer&) = delete;
    NatsServer& operator=(const NatsServer&) = delete;

    /// Starts the server (same port and store on every start) and waits until JetStream
    /// answers. Throws std::runtime_error when it does not within 15 s.
    void start();
    /// SIGTERM, then SIGKILL after 10 s; waits for the exit.
    void stop();
    [[nodiscard]] std::string url() const { return "nats://127.0.0.1:" + std::to_string(port_); }
    [[nodiscard]] const std::string& token() const noexcept { return token_; }
    [[nodiscard]] std::string log() const;

private:
    TempDir dir_;
    std::string token_;
    int port_;
    std::unique_ptr<ChildProcess> process_;
};

struct StoredMessage {
    std::uint64_t sequence = 0;
    std::string subject;
    std::string msg_id;        ///< header Nats-Msg-Id
    std::string content_type;  ///< header Content-Type
    std::string traceparent;   ///< header traceparent, empty when absent
    std::string tracestate;    ///< header tracestate, empty when absent
    std::string body;
};

/// One connection to a NatsServer for the test's own use (stream set-up, read-back).
class JetStreamClient {
public:
    explicit JetStreamClient(const NatsServer& server);
    ~JetStreamClient();
    JetStreamClient(const JetStreamClient&) = delete;
    JetStreamClient& operator=(const JetStreamClient&) = delete;

    /// Creates a file-backed stream; throws on failure.
    void add_stream(const std::string& name, const std::vector<std::string>& subjects, std::int32_t max_msg_size = -1);
    /// Publishes with a Nats-Msg-Id, as the plugin does; returns true when stored as new.
    bool publish(const std::string& subject, const std::string& msg_id, const std::string& body);
    /// How many messages the stream holds.
    std::uint64_t count(const std::string& stream);
    /// Every message of the stream under `filter`, in stream order (an ordered consumer).
    std::vector<StoredMessage> read_all(const std::string& stream, const std::string& filter, std::size_t expected,
                                        std::chrono::milliseconds timeout);
    /// A plain subscriber that never answers: requests to `subject` find a responder and
    /// wait in vain.
    void silent_responder(const std::string& subject);

private:
    natsConnection* nc_ = nullptr;
    jsCtx* js_ = nullptr;
    std::vector<natsSubscription*> subscriptions_;
};

}  // namespace outbox::test
