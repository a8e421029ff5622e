#include "nats_server.hpp"

#include <signal.h>

#include <map>
#include <stdexcept>
#include <thread>

#include "support/ports.hpp"

namespace outbox::test {
namespace {

constexpr const char* kNatsServer = OUTBOX_NATS_SERVER;

natsConnection* connect(const std::string& url, const std::string& token, int64_t timeout_ms) {
    natsOptions* options = nullptr;
    natsOptions_Create(&options);
    const char* servers[] = {url.c_str()};
    natsOptions_SetServers(options, servers, 1);
    if (!token.empty()) natsOptions_SetToken(options, token.c_str());
    natsOptions_SetTimeout(options, timeout_ms);
    natsOptions_SetAllowReconnect(options, true);
    natsOptions_SetMaxReconnect(options, -1);
    natsOptions_SetReconnectWait(options, 100);
    natsConnection* nc = nullptr;
    const natsStatus s = natsConnection_Connect(&nc, options);
    natsOptions_Destroy(options);
    return s == NATS_OK ? nc : nullptr;
}

void check(natsStatus s, const std::string& what) {
    if (s != NATS_OK) throw std::runtime_error(what + ": " + natsStatus_GetText(s));
}

}  // namespace

NatsServer::NatsServer(std::string token) : token_(std::move(token)), port_(free_port()) {}

NatsServer::~NatsServer() { stop(); }

void NatsServer::start() {
    std::vector<std::string> argv{kNatsServer, "-js", "-a", "127.0.0.1", "-p", std::to_string(port_), "-sd",
                                  (dir_.path() / "store").string()};
    if (!token_.empty()) {
        argv.push_back("--auth");
        argv.push_back(token_);
    }
    process_ = std::make_unique<ChildProcess>(argv, std::map<std::string, std::string>{}, (dir_.path() / "nats.log").string());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{15};
    while (std::chrono::steady_clock::now() < deadline) {
        if (process_->wait(std::chrono::milliseconds{0})) throw std::runtime_error("nats-server exited: " + log());
        if (natsConnection* nc = connect(url(), token_, 500)) {
            jsCtx* js = nullptr;
            jsAccountInfo* info = nullptr;
            const bool ready = natsConnection_JetStream(&js, nc, nullptr) == NATS_OK &&
                               js_GetAccountInfo(&info, js, nullptr, nullptr) == NATS_OK;
            if (info != nullptr) jsAccountInfo_Destroy(info);
            if (js != nullptr) jsCtx_Destroy(js);
            natsConnection_Destroy(nc);
            if (ready) return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds{50});
    }
    throw std::runtime_error("nats-server did not become ready: " + log());
}

void NatsServer::stop() {
    if (!process_) return;
    process_->signal(SIGTERM);
    if (!process_->wait(std::chrono::seconds{10})) {
        process_->signal(SIGKILL);
        process_->wait(std::chrono::seconds{10});
    }
    process_.reset();
}

std::string NatsServer::log() const { return read_file((dir_.path() / "nats.log").string()); }

JetStreamClient::JetStreamClient(const NatsServer& server) {
    nc_ = connect(server.url(), server.token(), 2000);
    if (nc_ == nullptr) throw std::runtime_error("cannot connect to " + server.url());
    check(natsConnection_JetStream(&js_, nc_, nullptr), "JetStream context");
}

JetStreamClient::~JetStreamClient() {
    for (auto* sub : subscriptions_) natsSubscription_Destroy(sub);
    if (js_ != nullptr) jsCtx_Destroy(js_);
    if (nc_ != nullptr) natsConnection_Destroy(nc_);
}

void JetStreamClient::add_stream(const std::string& name, const std::vector<std::string>& subjects,
                                 std::int32_t max_msg_size) {
    jsStreamConfig config;
    jsStreamConfig_Init(&config);
    config.Name = name.c_str();
    std::vector<const char*> list;
    for (const auto& subject : subjects) list.push_back(subject.c_str());
    config.Subjects = list.data();
    config.SubjectsLen = static_cast<int>(list.size());
    config.Storage = js_FileStorage;
    config.MaxMsgSize = max_msg_size;
    jsStreamInfo* info = nullptr;
    jsErrCode code = static_cast<jsErrCode>(0);
    check(js_AddStream(&info, js_, &config, nullptr, &code), "add stream " + name + " (" + std::to_string(code) + ")");
    jsStreamInfo_Destroy(info);
}

bool JetStreamClient::publish(const std::string& subject, const std::string& msg_id, const std::string& body) {
    jsPubOptions options;
    jsPubOptions_Init(&options);
    options.MsgId = msg_id.c_str();
    jsPubAck* ack = nullptr;
    check(js_Publish(&ack, js_, subject.c_str(), body.data(), static_cast<int>(body.size()), &options, nullptr),
          "publish");
    const bool stored = !ack->Duplicate;
    jsPubAck_Destroy(ack);
    return stored;
}

std::uint64_t JetStreamClient::count(const std::string& stream) {
    jsStreamInfo* info = nullptr;
    check(js_GetStreamInfo(&info, js_, stream.c_str(), nullptr, nullptr), "stream info");
    const std::uint64_t messages = info->State.Msgs;
    jsStreamInfo_Destroy(info);
    return messages;
}

std::vector<StoredMessage> JetStreamClient::read_all(const std::string& stream, const std::string& filter,
                                                     std::size_t expected, std::chrono::milliseconds timeout) {
    jsSubOptions options;
    jsSubOptions_Init(&options);
    options.Stream = stream.c_str();
    options.Ordered = true;
    natsSubscription* sub = nullptr;
    check(js_SubscribeSync(&sub, js_, filter.c_str(), nullptr, &options, nullptr), "ordered consumer");
    std::vector<StoredMessage> messages;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (messages.size() < expected && std::chrono::steady_clock::now() < deadline) {
        natsMsg* msg = nullptr;
        if (natsSubscription_NextMsg(&msg, sub, 500) != NATS_OK) continue;
        StoredMessage stored;
        stored.subject = natsMsg_GetSubject(msg);
        stored.body.assign(natsMsg_GetData(msg), static_cast<std::size_t>(natsMsg_GetDataLength(msg)));
        const char* value = nullptr;
        if (natsMsgHeader_Get(msg, "Nats-Msg-Id", &value) == NATS_OK) stored.msg_id = value;
        if (natsMsgHeader_Get(msg, "Content-Type", &value) == NATS_OK) stored.content_type = value;
        if (natsMsgHeader_Get(msg, "traceparent", &value) == NATS_OK) stored.traceparent = value;
        if (natsMsgHeader_Get(msg, "tracestate", &value) == NATS_OK) stored.tracestate = value;
        jsMsgMetaData* meta = nullptr;
        if (natsMsg_GetMetaData(&meta, msg) == NATS_OK) {
            stored.sequence = meta->Sequence.Stream;
            jsMsgMetaData_Destroy(meta);
        }
        natsMsg_Destroy(msg);
        messages.push_back(std::move(stored));
    }
    natsSubscription_Destroy(sub);
    return messages;
}

void JetStreamClient::silent_responder(const std::string& subject) {
    natsSubscription* sub = nullptr;
    check(natsConnection_SubscribeSync(&sub, nc_, subject.c_str()), "subscribe");
    check(natsConnection_Flush(nc_), "flush");
    subscriptions_.push_back(sub);
}

}  // namespace outbox::test
