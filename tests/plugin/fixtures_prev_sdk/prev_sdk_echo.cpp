// A plugin built against the SDK 1.0 headers in this folder (96-byte manifest, no handler
// name, one-argument OUTBOX_PLUGIN): the current host must load it. Its section is found
// by the file name (libprev-echo.so), so it reads its config in the constructor.
#include <stdexcept>

#include <outbox/sdk.hpp>

#if OUTBOX_ABI_MINOR != 0
#error "this fixture must be built against the SDK 1.0 headers in tests/plugin/fixtures_prev_sdk/include"
#endif

namespace {

class PrevEcho final : public outbox::sdk::Handler {
public:
    explicit PrevEcho(const std::string& config_json) {
        if (nlohmann::json::parse(config_json).value("fail", false)) throw std::runtime_error("asked to fail");
    }
    std::string handler_name() const override { return "prev-echo"; }
    std::vector<std::string> event_types() const override { return {"EchoRequested"}; }
    void handle(const outbox::sdk::Event&, outbox::sdk::Context& ctx) override {
        ctx.log(outbox::sdk::LogLevel::Info, "prev-echo handled an event");
    }
};

}  // namespace

OUTBOX_PLUGIN(PrevEcho);
