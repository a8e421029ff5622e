#pragma once
// The example application's business writes, each with the event that must follow it, in
// the caller's transaction: the event exists if and only if the row does.

#include <string>

#include <pqxx/pqxx>

namespace outbox::examples::app {

struct Registration {
    std::string website_id;
    std::string event_id;
    bool created = false;  ///< false when the domain was already registered
};

/// Registers `domain` (or finds it) and publishes WebsiteRegistered with
/// dedup_key = website_id: however many times, and however concurrently, a domain is
/// registered, it gets one website row and one event (one classification job).
Registration register_website(pqxx::dbtransaction& tx, const std::string& company, const std::string& domain);

/// Records a mission completion and publishes MissionCompleted; returns the event id.
std::string complete_mission(pqxx::dbtransaction& tx, const std::string& company, const std::string& user_id,
                             const std::string& mission_id, const std::string& solar_term);

}  // namespace outbox::examples::app
