// outbox/sdk/testing.hpp: what a plugin team's unit test sees of a handler without a host.
#include "outbox/sdk/testing.hpp"

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "outbox/sdk.hpp"

namespace {

using namespace std::chrono_literals;
using outbox::sdk::Disposition;
using outbox::sdk::testing::make_event;
using outbox::sdk::testing::TestContext;

/// A handler like a team's: logs, honours cancellation and its deadline, uses its config.
class WaitingHandler final : public outbox::sdk::Handler {
public:
    explicit WaitingHandler(const std::string& config_json)
        : mode_(nlohmann::json::parse(config_json).value("mode", "plain")) {}
    std::string handler_name() const override { return "waiting"; }
    std::vector<std::string> event_types() const override { return {"WaitRequested"}; }
    void handle(const outbox::sdk::Event& event, outbox::sdk::Context& ctx) override {
        ctx.log(outbox::sdk::LogLevel::Info, "handling " + event.type + " in mode " + mode_);
        if (mode_ == "db") ctx.db().exec("SELECT 1");
        if (mode_ == "bad") throw outbox::sdk::NonRetryableError("BAD_INPUT", "the payload is not usable");
        if (mode_ != "wait") return;
        while (!ctx.cancelled()) {
            if (ctx.remaining() == 0ms) throw outbox::sdk::RetryableError("TIMEOUT", "deadline passed");
            std::this_thread::sleep_for(1ms);
        }
        throw outbox::sdk::RetryableError("CANCELLED", "lease lost");
    }

private:
    std::string mode_;
};

TEST(SdkTesting, AHandlerRunsAgainstATestContextAndItsLogsAreObserved) {
    TestContext ctx(R"({"mode":"plain"})");
    WaitingHandler handler(ctx.config_json());
    EXPECT_EQ(outbox::sdk::testing::run(handler, make_event("WaitRequested"), ctx), std::nullopt);
    ASSERT_EQ(ctx.logs().size(), 1U);
    EXPECT_EQ(ctx.logs()[0].message, "handling WaitRequested in mode plain");
    EXPECT_EQ(ctx.logs()[0].level, outbox::sdk::LogLevel::Info);
    EXPECT_TRUE(ctx.logged("mode plain"));
    EXPECT_FALSE(ctx.logged("mode wait"));
}

TEST(SdkTesting, RunReturnsTheHandlersClassificationOfWhatItThrew) {
    TestContext ctx(R"({"mode":"bad"})");
    WaitingHandler handler(ctx.config_json());
    const auto outcome = outbox::sdk::testing::run(handler, make_event("WaitRequested"), ctx);
    ASSERT_TRUE(outcome.has_value());
    EXPECT_EQ(outcome->kind, Disposition::Kind::Review);
    EXPECT_EQ(outcome->code, "BAD_INPUT");
}

TEST(SdkTesting, CancellingTheContextIsSeenByARunningHandler) {
    TestContext ctx(R"({"mode":"wait"})", 60s);
    WaitingHandler handler(ctx.config_json());
    std::optional<Disposition> outcome;
    std::thread call([&] { outcome = outbox::sdk::testing::run(handler, make_event("WaitRequested"), ctx); });
    ctx.cancel();
    call.join();
    EXPECT_TRUE(ctx.cancelled());
    ASSERT_TRUE(outcome.has_value());
    EXPECT_EQ(outcome->code, "CANCELLED");
}

TEST(SdkTesting, APassedDeadlineIsSeenThroughRemaining) {
    TestContext ctx(R"({"mode":"wait"})");
    ctx.set_deadline(std::chrono::steady_clock::now() - 1s);
    EXPECT_EQ(ctx.remaining(), 0ms);
    WaitingHandler handler(ctx.config_json());
    const auto outcome = outbox::sdk::testing::run(handler, make_event("WaitRequested"), ctx);
    ASSERT_TRUE(outcome.has_value());
    EXPECT_EQ(outcome->code, "TIMEOUT");
    EXPECT_EQ(outcome->kind, Disposition::Kind::Retry);
}

TEST(SdkTesting, DbThrowsAClearErrorUnlessTheTestGivesOne) {
    TestContext ctx(R"({"mode":"db"})");
    try {
        ctx.db();
        ADD_FAILURE() << "a TestContext has no database";
    } catch (const std::logic_error& error) {
        EXPECT_NE(std::string(error.what()).find("TestContext has no database: give it a Db with use_db()"),
                  std::string::npos)
            << error.what();
    }

    class CountingDb final : public outbox::sdk::Db {
    public:
        outbox::sdk::Rows exec(std::string_view, const outbox::sdk::Params&) override {
            ++calls;
            return {};
        }
        int calls = 0;
    } db;
    ctx.use_db(&db);
    WaitingHandler handler(ctx.config_json());
    EXPECT_EQ(outbox::sdk::testing::run(handler, make_event("WaitRequested"), ctx), std::nullopt);
    EXPECT_EQ(db.calls, 1);
}

TEST(SdkTesting, MakeEventLooksLikeAFirstDelivery) {
    const auto event = make_event("WaitRequested", R"({"a":1})");
    EXPECT_EQ(event.type, "WaitRequested");
    EXPECT_EQ(event.attempt, 1);
    EXPECT_EQ(event.payload().at("a"), 1);
    EXPECT_FALSE(event.id.empty());
}

TEST(SdkTesting, AReplayIsWhatTheTestSaysAndAFirstDeliveryByDefault) {
    TestContext ctx;
    EXPECT_FALSE(ctx.replay());
    ctx.set_replay(true);
    EXPECT_TRUE(ctx.replay());
    // Through the interface a handler sees.
    const outbox::sdk::Context& seen = ctx;
    EXPECT_TRUE(seen.replay());
}

// A Context written against SDK 1.2, without replay(), still compiles and answers false.
class ContextOfAnEarlierSdk final : public outbox::sdk::Context {
public:
    outbox::sdk::Db& db() override { throw std::logic_error("no database"); }
    [[nodiscard]] bool cancelled() const override { return false; }
    [[nodiscard]] std::chrono::steady_clock::time_point deadline() const override { return {}; }
    [[nodiscard]] const std::string& config_json() const override { return config_; }
    void log(outbox::sdk::LogLevel, std::string_view) override {}
    [[nodiscard]] const outbox::sdk::TraceContext& trace() const override { return trace_; }

private:
    std::string config_ = "{}";
    outbox::sdk::TraceContext trace_;
};

TEST(SdkTesting, AContextWithoutReplayIsAFirstDelivery) {
    const ContextOfAnEarlierSdk ctx;
    EXPECT_FALSE(static_cast<const outbox::sdk::Context&>(ctx).replay());
}

}  // namespace
