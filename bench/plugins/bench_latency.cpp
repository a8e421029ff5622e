// Benchmark handler that records when each call started: one line
// "<event_id> <occurred_at> <handler start>" (microseconds since the epoch) per call,
// appended to the file named by its config ({"output": "/path"}). occurred_at is the
// publishing transaction's start, so the benchmark publishes every latency event in its own
// short autocommit statement (and notes when that commit returned, to join on event_id).
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>

#include <outbox/sdk.hpp>

class BenchLatency : public outbox::sdk::Handler {
public:
    BenchLatency() = default;
    explicit BenchLatency(const std::string& config_json)
        : output_(nlohmann::json::parse(config_json).value("output", std::string())) {}
    ~BenchLatency() override {
        if (file_ != nullptr) std::fclose(file_);
    }
    BenchLatency(const BenchLatency&) = delete;
    BenchLatency& operator=(const BenchLatency&) = delete;

    [[nodiscard]] std::string handler_name() const override { return "bench-latency"; }
    [[nodiscard]] std::vector<std::string> event_types() const override { return {"BenchLatency"}; }

    void handle(const outbox::sdk::Event& event, outbox::sdk::Context&) override {
        const auto started = std::chrono::system_clock::now();
        const auto micros = [](std::chrono::system_clock::time_point t) {
            return static_cast<long long>(
                std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count());
        };
        if (output_.empty()) return;
        std::lock_guard lock(mutex_);
        // Opened on first use: constructors stay free of side effects.
        if (file_ == nullptr) file_ = std::fopen(output_.c_str(), "a");
        if (file_ == nullptr) throw outbox::sdk::NonRetryableError("BENCH_OUTPUT", "cannot open the output file");
        std::fprintf(file_, "%s %lld %lld\n", event.id.c_str(), micros(event.occurred_at), micros(started));
        std::fflush(file_);
    }

private:
    std::string output_;
    std::mutex mutex_;
    std::FILE* file_ = nullptr;
};

OUTBOX_PLUGIN(BenchLatency, "bench-latency");
