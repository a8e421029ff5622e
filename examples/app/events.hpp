#pragma once
// The example application's business writes, each with the event that must follow it, in
// the caller's transaction: the event exists if and only if the row does.

#include <cstdint>
#include <string>
#include <vector>

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

/// Records a mission completion and publishes MissionCompleted with the numeric ids
/// (completion_id, user_id, mission_id) as JSON numbers; returns the event id.
std::string complete_mission(pqxx::dbtransaction& tx, const std::string& company, std::int64_t user_id,
                             std::int64_t mission_id, const std::string& solar_term);

/// Where this app's SafePayload schemas would let through what the event-type registry
/// (outbox_event_type, `outboxd event-types apply examples/event-types.yaml`) refuses, one
/// line per problem; empty when they agree or the types are not registered.
std::vector<std::string> registry_mismatches(pqxx::connection& conn);

/// Users of run `tag` have ids first_user_id(tag) + 0 .. kUsersPerTag - 1: the tag's first
/// six letters (a-z) read as a base-26 number, plus one, times a million. Runs whose tags
/// share their first six letters share users.
std::int64_t first_user_id(const std::string& tag);
inline constexpr std::int64_t kUsersPerTag = 999'999;

}  // namespace outbox::examples::app
