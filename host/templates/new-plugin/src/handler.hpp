#pragma once

#include <string>
#include <vector>

#include <outbox/sdk.hpp>

namespace @TARGET@_plugin {

/// Handles @EVENT@ events. outboxd constructs it once, with the `handlers.@NAME@.config`
/// section of its YAML as JSON text, and calls handle() from several threads at once.
class @CLASS@ final : public outbox::sdk::Handler {
public:
    explicit @CLASS@(const std::string& config_json);

    [[nodiscard]] std::string handler_name() const override { return "@NAME@"; }
    [[nodiscard]] std::vector<std::string> event_types() const override { return {"@EVENT@"}; }
    void handle(const outbox::sdk::Event& event, outbox::sdk::Context& ctx) override;

private:
    std::string label_;
};

}  // namespace @TARGET@_plugin
