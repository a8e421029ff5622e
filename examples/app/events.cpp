#include "events.hpp"

#include <outbox/publisher.hpp>
#include <outbox/sdk/registry.hpp>

namespace outbox::examples::app {
namespace {

using sdk::FieldKind;

// The allow-lists: a field that is not declared here cannot reach the outbox.
const sdk::PayloadSchema kWebsiteRegistered{{"website_id", FieldKind::Uuid}, {"domain", FieldKind::String, 253}};
const sdk::PayloadSchema kMissionCompleted{{"completion_id", FieldKind::Integer},
                                           {"user_id", FieldKind::Integer},
                                           {"mission_id", FieldKind::Integer},
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

std::string complete_mission(pqxx::dbtransaction& tx, const std::string& company, std::int64_t user_id,
                             std::int64_t mission_id, const std::string& solar_term) {
    const pqxx::result row = tx.exec_params(
        "INSERT INTO user_mission_completion (user_id, mission_id, solar_term, completed_at) "
        "VALUES ($1, $2, $3, now()) RETURNING id",
        user_id, mission_id, solar_term);
    sdk::SafePayload payload{kMissionCompleted};
    payload.set("completion_id", row.at(0).at(0).as<std::int64_t>())
        .set("user_id", user_id)
        .set("mission_id", mission_id)
        .set("solar_term", solar_term);
    return sdk::publish(tx, company, "MissionCompleted", payload, {.aggregate_key = std::to_string(user_id)});
}

std::vector<std::string> registry_mismatches(pqxx::connection& conn) {
    std::vector<std::string> problems;
    pqxx::read_transaction tx(conn);
    for (const auto& [type, schema] : {std::pair{"WebsiteRegistered", &kWebsiteRegistered},
                                       std::pair{"MissionCompleted", &kMissionCompleted}}) {
        const pqxx::result row = tx.exec_params("SELECT fields::text FROM outbox_event_type WHERE event_type = $1", type);
        if (row.empty()) continue;
        for (auto& problem : sdk::registry_mismatches(*schema, nlohmann::json::parse(row[0][0].as<std::string>()))) {
            problems.push_back(std::string(type) + ": " + problem);
        }
    }
    return problems;
}

std::int64_t first_user_id(const std::string& tag) {
    std::int64_t number = 0;
    for (std::size_t i = 0; i < tag.size() && i < 6; ++i) number = number * 26 + (tag[i] - 'a');
    return (number + 1) * 1'000'000;
}

}  // namespace outbox::examples::app
