#include "events.hpp"

#include <outbox/publisher.hpp>

namespace outbox::examples::app {
namespace {

using sdk::FieldKind;

// The allow-lists: a field that is not declared here cannot reach the outbox.
const sdk::PayloadSchema kWebsiteRegistered{{"website_id", FieldKind::Uuid}, {"domain", FieldKind::String, 253}};
const sdk::PayloadSchema kMissionCompleted{{"completion_id", FieldKind::Uuid},
                                           {"user_id", FieldKind::Identifier, 64},
                                           {"mission_id", FieldKind::Identifier, 64},
                                           {"solar_term", FieldKind::Identifier, 32}};

}  // namespace

Registration register_website(pqxx::dbtransaction& tx, const std::string& company, const std::string& domain) {
    // The upsert waits for a concurrent registration of the same domain and then returns
    // its id, so both transactions publish with the same dedup_key.
    const pqxx::result row = tx.exec_params(
        "INSERT INTO website (id, domain) VALUES (gen_random_uuid(), $1) "
        "ON CONFLICT (domain) DO UPDATE SET domain = EXCLUDED.domain "
        "RETURNING id::text, (xmax = 0) AS created",
        domain);
    Registration registration;
    registration.website_id = row.at(0).at(0).as<std::string>();
    registration.created = row.at(0).at(1).as<bool>();
    sdk::SafePayload payload{kWebsiteRegistered};
    payload.set("website_id", registration.website_id).set("domain", domain);
    registration.event_id =
        sdk::publish(tx, company, "WebsiteRegistered", payload, {.dedup_key = registration.website_id});
    return registration;
}

std::string complete_mission(pqxx::dbtransaction& tx, const std::string& company, const std::string& user_id,
                             const std::string& mission_id, const std::string& solar_term) {
    const pqxx::result row = tx.exec_params(
        "INSERT INTO user_mission_completion (id, user_id, mission_id, solar_term, completed_at) "
        "VALUES (gen_random_uuid(), $1, $2, $3, now()) RETURNING id::text",
        user_id, mission_id, solar_term);
    sdk::SafePayload payload{kMissionCompleted};
    payload.set("completion_id", row.at(0).at(0).as<std::string>())
        .set("user_id", user_id)
        .set("mission_id", mission_id)
        .set("solar_term", solar_term);
    return sdk::publish(tx, company, "MissionCompleted", payload, {.aggregate_key = user_id});
}

}  // namespace outbox::examples::app
