#pragma once
// The C++ publisher API: write an event in the same PostgreSQL transaction as the business
// change it follows. Header-only; link libpqxx. It calls the SQL function outbox_publish(),
// which validates the payload again, inserts the row and wakes the workers on commit.
//
//   static const outbox::sdk::PayloadSchema kWebsiteRegistered{
//       {"website_id", outbox::sdk::FieldKind::Uuid},
//       {"domain", outbox::sdk::FieldKind::String, 253}};
//   pqxx::work tx{conn};
//   tx.exec_params("INSERT INTO website(id, domain) VALUES ($1, $2)", id, domain);
//   outbox::sdk::SafePayload payload{kWebsiteRegistered};
//   payload.set("website_id", id).set("domain", domain);
//   outbox::sdk::publish(tx, company_id, "WebsiteRegistered", payload, {.dedup_key = id});
//   tx.commit();   // the event exists if and only if the website does

#include <optional>
#include <string>
#include <string_view>

#include <pqxx/pqxx>

#include "outbox/sdk/payload.hpp"

namespace outbox::sdk {

struct PublishOptions {
    /// Optional ordering key (e.g. the aggregate's id), stored as aggregate_key.
    std::optional<std::string> aggregate_key{};
    /// When set, a second publish of the same (company_id, event_type, dedup_key) inserts
    /// nothing and returns the first event's id, or an empty string when the connection's
    /// login may not read event_publication (the publisher role): it may name any company,
    /// so it is never told an existing event's id.
    std::optional<std::string> dedup_key{};
};

/// Publishes one event inside `tx` and returns its event_id. Takes a dbtransaction (a real
/// transaction or subtransaction), so publishing outside a transaction does not compile.
/// Throws PayloadError for a payload that breaks its schema, FreeTextError for an
/// aggregate_key shaped like personal data (e-mail, phone, JWT, long digit run), and
/// pqxx::sql_error when the database refuses it (e.g. an invalid event_type); nothing is
/// inserted in any case.
inline std::string publish(pqxx::dbtransaction& tx, std::string_view company_id, std::string_view event_type,
                           const SafePayload& payload, const PublishOptions& options = {}) {
    const std::string json = payload.json();
    if (options.aggregate_key) {
        if (const char* rule = detail::free_text_rule(*options.aggregate_key)) throw FreeTextError("aggregate_key", rule);
    }
    const pqxx::result rows = tx.exec_params(
        "SELECT outbox_publish($1, $2, $3::jsonb, $4, $5)::text", std::string(company_id), std::string(event_type), json,
        options.aggregate_key ? options.aggregate_key->c_str() : static_cast<const char*>(nullptr),
        options.dedup_key ? options.dedup_key->c_str() : static_cast<const char*>(nullptr));
    const pqxx::field id = rows.at(0).at(0);
    return id.is_null() ? std::string() : id.as<std::string>();
}

}  // namespace outbox::sdk
