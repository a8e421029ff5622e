#include <gtest/gtest.h>
#include <outbox/sdk/testing.hpp>

#include "handler.hpp"

namespace {

using outbox::sdk::testing::make_event;
using outbox::sdk::testing::run;
using outbox::sdk::testing::TestContext;

TEST(@CLASS@, HandlesAnEventAndLogsIt) {
    TestContext ctx(R"({"label":"test-label"})");
    @TARGET@_plugin::@CLASS@ handler(ctx.config_json());
    EXPECT_EQ(run(handler, make_event("@EVENT@", R"({"id":"42"})"), ctx), std::nullopt);
    EXPECT_TRUE(ctx.logged("test-label handled an event"));
}

TEST(@CLASS@, APayloadWithoutIdGoesToReview) {
    TestContext ctx;
    @TARGET@_plugin::@CLASS@ handler(ctx.config_json());
    const auto outcome = run(handler, make_event("@EVENT@", "{}"), ctx);
    ASSERT_TRUE(outcome.has_value());
    EXPECT_EQ(outcome->kind, outbox::sdk::Disposition::Kind::Review);
    EXPECT_EQ(outcome->code, "MISSING_ID");
}

TEST(@CLASS@, ACancelledCallIsRetried) {
    TestContext ctx;
    ctx.cancel();
    @TARGET@_plugin::@CLASS@ handler(ctx.config_json());
    const auto outcome = run(handler, make_event("@EVENT@", R"({"id":"42"})"), ctx);
    ASSERT_TRUE(outcome.has_value());
    EXPECT_EQ(outcome->kind, outbox::sdk::Disposition::Kind::Retry);
}

}  // namespace
