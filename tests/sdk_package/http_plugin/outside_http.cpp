#include <outbox/sdk.hpp>
#include <outbox/sdk/http.hpp>

class OutsideHttp : public outbox::sdk::Handler {
public:
    explicit OutsideHttp(const std::string& config_json)
        : endpoint_(outbox::sdk::http::parse_endpoint(
              nlohmann::json::parse(config_json).value("endpoint", "http://127.0.0.1:9/hook"), "config.endpoint")) {}
    std::string handler_name() const override { return "outside-http"; }
    std::vector<std::string> event_types() const override { return {"OutsideHttpEvent"}; }
    void handle(const outbox::sdk::Event& event, outbox::sdk::Context& ctx) override {
        outbox::sdk::http::post_json(ctx, endpoint_, {{"Idempotency-Key", event.id}}, event.payload_json,
                                     std::chrono::seconds{5});
    }

private:
    outbox::sdk::http::Endpoint endpoint_;
};

OUTBOX_PLUGIN(OutsideHttp);
