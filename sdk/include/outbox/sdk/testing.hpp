#pragma once
// Unit tests of a handler without a host or a database: construct the handler as the host
// would (with its config JSON), build an Event, call handle() with a TestContext, and look
// at what it logged and threw.
//
//   outbox::sdk::testing::TestContext ctx(R"({"endpoint":"http://127.0.0.1:9"})");
//   MyHandler handler(ctx.config_json());
//   handler.handle(outbox::sdk::testing::make_event("WebsiteRegistered", R"({"url":"x"})"), ctx);
//   EXPECT_TRUE(ctx.logged("classified"));
//
// ctx.db() has no database behind it: it throws std::logic_error naming what to do, unless
// the test gives it a Db of its own with use_db(). Handlers whose logic is in SQL are
// tested against a real PostgreSQL through the host instead (see docs/plugins.md).
// Test code only: nothing here is used by the host, and a plugin never includes it.

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "outbox/sdk/context.hpp"
#include "outbox/sdk/event.hpp"
#include "outbox/sdk/handler.hpp"

namespace outbox::sdk::testing {

/// One line a handler wrote with ctx.log().
struct LogLine {
    LogLevel level = LogLevel::Info;
    std::string message;
};

/// A Context for tests. Cancellation and the deadline are set by the test; every log line
/// is kept. Thread-safe like the host's Context (cancelled(), deadline() and log() may be
/// called from any thread; cancel() and set_deadline() from the test thread).
class TestContext final : public Context {
public:
    /// `config_json` is what config_json() returns (the handler's section as JSON text);
    /// the deadline is `timeout` from now.
    explicit TestContext(std::string config_json = "{}",
                         std::chrono::milliseconds timeout = std::chrono::seconds{30})
        : config_json_(std::move(config_json)),
          deadline_ns_((std::chrono::steady_clock::now() + timeout).time_since_epoch().count()) {}

    /// Throws std::logic_error: a TestContext has no database unless use_db() gave it one.
    Db& db() override {
        if (db_ == nullptr) {
            throw std::logic_error(
                "outbox::sdk::testing::TestContext has no database: give it a Db with use_db(), or test handlers "
                "that use ctx.db() against PostgreSQL through outboxd");
        }
        return *db_;
    }
    [[nodiscard]] bool cancelled() const override { return cancelled_.load(); }
    [[nodiscard]] std::chrono::steady_clock::time_point deadline() const override {
        return std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(deadline_ns_.load()));
    }
    [[nodiscard]] const std::string& config_json() const override { return config_json_; }
    void log(LogLevel level, std::string_view message) override {
        const std::lock_guard lock(mutex_);
        logs_.push_back(LogLine{level, std::string(message)});
    }
    [[nodiscard]] const TraceContext& trace() const override { return trace_; }
    [[nodiscard]] bool replay() const override { return replay_; }

    /// What the host does when it loses the event's lease or shuts down past its drain time.
    void cancel() noexcept { cancelled_.store(true); }
    void set_deadline(std::chrono::steady_clock::time_point deadline) noexcept {
        deadline_ns_.store(deadline.time_since_epoch().count());
    }
    /// What trace() returns (empty by default: a publisher that gave no trace context).
    /// Call before handle(), not during it.
    void set_trace(TraceContext trace) { trace_ = std::move(trace); }
    /// What replay() returns (false by default: a first delivery). Call before handle().
    void set_replay(bool replay) noexcept { replay_ = replay; }
    /// A Db of the test's own (it must outlive this context); nullptr removes it.
    void use_db(Db* db) noexcept { db_ = db; }

    /// Every line logged so far, in order.
    [[nodiscard]] std::vector<LogLine> logs() const {
        const std::lock_guard lock(mutex_);
        return logs_;
    }
    /// True when a line containing `fragment` was logged.
    [[nodiscard]] bool logged(std::string_view fragment) const {
        const std::lock_guard lock(mutex_);
        for (const auto& line : logs_) {
            if (line.message.find(fragment) != std::string::npos) return true;
        }
        return false;
    }

private:
    std::string config_json_;
    std::atomic<bool> cancelled_{false};
    std::atomic<std::chrono::steady_clock::duration::rep> deadline_ns_;
    Db* db_ = nullptr;
    TraceContext trace_;
    bool replay_ = false;
    mutable std::mutex mutex_;
    std::vector<LogLine> logs_;
};

/// An Event as the host would hand it over, first attempt, with a fixed test id.
inline Event make_event(std::string type, std::string payload_json = "{}",
                        std::string id = "00000000-0000-4000-8000-000000000001") {
    Event event;
    event.id = std::move(id);
    event.type = std::move(type);
    event.company_id = "test-company";
    event.payload_json = std::move(payload_json);
    event.attempt = 1;
    event.occurred_at = std::chrono::system_clock::now();
    return event;
}

/// Runs handler.handle(event, ctx) and returns what the host would record: std::nullopt
/// on success, otherwise the handler's classify() of what it threw (code and retry or review).
inline std::optional<Disposition> run(Handler& handler, const Event& event, Context& ctx) {
    try {
        handler.handle(event, ctx);
        return std::nullopt;
    } catch (const std::exception& error) {
        return handler.classify(error);
    } catch (...) {
        return Disposition::retry("UNCLASSIFIED");
    }
}

}  // namespace outbox::sdk::testing
