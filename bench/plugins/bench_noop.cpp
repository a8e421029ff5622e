// Benchmark handler that does nothing: measures the runtime's own cost per event
// (claim, hand-out, batched completion with its consumption row).
#include <outbox/sdk.hpp>

class BenchNoop : public outbox::sdk::Handler {
public:
    [[nodiscard]] std::string handler_name() const override { return "bench-noop"; }
    [[nodiscard]] std::vector<std::string> event_types() const override { return {"BenchNoop"}; }
    void handle(const outbox::sdk::Event&, outbox::sdk::Context&) override {}
};

OUTBOX_PLUGIN(BenchNoop, "bench-noop");
