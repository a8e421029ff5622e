#include "handler.hpp"

namespace @TARGET@_plugin {

@CLASS@::@CLASS@(const std::string& config_json)
    : label_(nlohmann::json::parse(config_json).value("label", std::string("@NAME@"))) {}

void @CLASS@::handle(const outbox::sdk::Event& event, outbox::sdk::Context& ctx) {
    const nlohmann::json payload = event.payload();
    if (!payload.contains("id")) {
        // Retrying cannot fix the payload: the event goes to review.
        throw outbox::sdk::NonRetryableError("MISSING_ID", "the payload has no id");
    }
    if (ctx.cancelled()) throw outbox::sdk::RetryableError("CANCELLED", "the host gave up this call");
    // Do the work here: call remote systems with event.id as the idempotency key and a
    // timeout of at most ctx.remaining(); use ctx.db() for database effects.
    ctx.log(outbox::sdk::LogLevel::Info, label_ + " handled an event");
}

}  // namespace @TARGET@_plugin
