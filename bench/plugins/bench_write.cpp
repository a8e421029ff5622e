// Benchmark handler that writes one row through ctx.db(): measures the cost of a handler
// transaction (lazy open, INSERT, lease fence, consumption row, commit). The table
// bench_effect(event_id uuid PRIMARY KEY, written_at timestamptz) belongs to the benchmark.
#include <outbox/sdk.hpp>

class BenchWrite : public outbox::sdk::Handler {
public:
    [[nodiscard]] std::string handler_name() const override { return "bench-write"; }
    [[nodiscard]] std::vector<std::string> event_types() const override { return {"BenchWrite"}; }
    void handle(const outbox::sdk::Event& event, outbox::sdk::Context& ctx) override {
        ctx.db().exec("INSERT INTO bench_effect (event_id) VALUES ($1::uuid) ON CONFLICT DO NOTHING", {event.id});
    }
};

OUTBOX_PLUGIN(BenchWrite, "bench-write");
