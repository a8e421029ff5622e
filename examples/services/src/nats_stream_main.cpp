// nats-stream: creates the JetStream stream the demo's nats-relay publishes into, and counts
// its messages, through the NATS C client (Debian has no NATS command-line tool).
//   nats-stream create --server nats://127.0.0.1:4222 --stream OUTBOX --subject 'outbox.>'
//   nats-stream count --server nats://127.0.0.1:4222 --stream OUTBOX [--subject outbox.*.MissionCompleted]
#include <cstdint>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>
#include <nats/nats.h>

namespace {

struct Client {
    natsConnection* nc = nullptr;
    jsCtx* js = nullptr;
    ~Client() {
        if (js != nullptr) jsCtx_Destroy(js);
        if (nc != nullptr) natsConnection_Destroy(nc);
    }
};

int fail(const std::string& what, natsStatus status) {
    std::cerr << "nats-stream: " << what << ": " << natsStatus_GetText(status) << "\n";
    return 1;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"Creates the demo's JetStream stream and counts its messages"};
    app.require_subcommand(1);
    std::string server = "nats://127.0.0.1:4222";
    std::string stream = "OUTBOX";
    std::string subject = "outbox.>";
    auto* create = app.add_subcommand("create", "create the stream (file storage, 2 minutes duplicate window)");
    auto* count = app.add_subcommand("count", "print the number of messages in the stream (on one subject, if given)");
    for (auto* command : {create, count}) {
        command->add_option("--server", server, "NATS server URL")->capture_default_str();
        command->add_option("--stream", stream, "stream name")->capture_default_str();
    }
    create->add_option("--subject", subject, "subjects the stream takes")->capture_default_str();
    std::string filter;
    count->add_option("--subject", filter, "count only this subject (wildcards allowed)");
    CLI11_PARSE(app, argc, argv);

    Client client;
    natsOptions* options = nullptr;
    natsStatus s = natsOptions_Create(&options);
    if (s == NATS_OK) s = natsOptions_SetURL(options, server.c_str());
    if (s == NATS_OK) s = natsOptions_SetTimeout(options, 2000);
    if (s == NATS_OK) s = natsConnection_Connect(&client.nc, options);
    natsOptions_Destroy(options);
    if (s != NATS_OK) return fail("cannot connect to " + server, s);
    if ((s = natsConnection_JetStream(&client.js, client.nc, nullptr)) != NATS_OK) return fail("JetStream", s);

    if (create->parsed()) {
        jsStreamConfig config;
        jsStreamConfig_Init(&config);
        config.Name = stream.c_str();
        const char* subjects[] = {subject.c_str()};
        config.Subjects = subjects;
        config.SubjectsLen = 1;
        config.Storage = js_FileStorage;
        config.Duplicates = static_cast<int64_t>(120) * 1000 * 1000 * 1000;  // nanoseconds
        jsStreamInfo* info = nullptr;
        jsErrCode code = static_cast<jsErrCode>(0);
        s = js_AddStream(&info, client.js, &config, nullptr, &code);
        jsStreamInfo_Destroy(info);
        if (s != NATS_OK) return fail("cannot create stream " + stream + " (JetStream error " + std::to_string(code) + ")", s);
        std::cout << "stream " << stream << " takes " << subject << "\n";
        return 0;
    }

    jsStreamInfo* info = nullptr;
    jsOptions js_options;
    jsOptions_Init(&js_options);
    if (!filter.empty()) js_options.Stream.Info.SubjectsFilter = filter.c_str();
    s = js_GetStreamInfo(&info, client.js, stream.c_str(), &js_options, nullptr);
    if (s != NATS_OK) return fail("cannot read stream " + stream, s);
    std::uint64_t messages = info->State.Msgs;
    if (!filter.empty()) {
        messages = 0;
        if (info->State.Subjects != nullptr) {
            for (int i = 0; i < info->State.Subjects->Count; ++i) messages += info->State.Subjects->List[i].Msgs;
        }
    }
    jsStreamInfo_Destroy(info);
    std::cout << messages << "\n";
    return 0;
}
