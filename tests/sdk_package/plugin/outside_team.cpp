#include <outbox/sdk.hpp>

class OutsideTeam : public outbox::sdk::Handler {
public:
    std::string handler_name() const override { return "outside-team"; }
    std::vector<std::string> event_types() const override { return {"OutsideTeamEvent"}; }
    void handle(const outbox::sdk::Event&, outbox::sdk::Context&) override {}
};

OUTBOX_PLUGIN(OutsideTeam);
