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
//
// Several keyed events in one transaction go through publish_many() in one call: it takes
// the aggregates' locks in one order, so concurrent publishers cannot deadlock.
// A delayed event is stored now and not delivered before its time:
//   outbox::sdk::publish(tx, company_id, "TrialEnding", payload,
//                        {.deliver_after = std::chrono::system_clock::now() + std::chrono::hours{24 * 13}});
// The request's trace context goes with the event to its handlers:
//   outbox::sdk::publish(tx, company_id, "WebsiteRegistered", payload,
//                        {.traceparent = request.header("traceparent")});

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

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
    /// When set, the event is stored now but no handler is called before this time (read
    /// on this process's clock; the database's clock decides when it is due). A time in the
    /// past delivers at once. More than 1 year ahead is refused (pqxx::sql_error, SQLSTATE
    /// 22023). Later events of the same aggregate_key wait for it. Needs schema version 19;
    /// left unset, publish() works with every schema version. Ignored for a repeated
    /// dedup_key: the first event keeps its own time.
    std::optional<std::chrono::system_clock::time_point> deliver_after{};
    /// The W3C trace context of the request this event follows (its `traceparent` and
    /// `tracestate` headers, as received), handed to handlers as Context::trace(). A
    /// malformed one is dropped by the database, never refused: a new trace starts at the
    /// handler. Unset, the transaction's outbox.traceparent / outbox.tracestate settings
    /// apply. Needs schema version 23; left unset, publish() works with every schema version.
    std::optional<std::string> traceparent{};
    std::optional<std::string> tracestate{};
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
    const char* aggregate_key = options.aggregate_key ? options.aggregate_key->c_str() : nullptr;
    const char* dedup_key = options.dedup_key ? options.dedup_key->c_str() : nullptr;
    // Without a delay or a trace context the call names five arguments, as before, so it
    // also works against schemas older than either. The time travels as microseconds since
    // the epoch: exact, and independent of the session's time zone and DateStyle.
    std::string micros;
    if (options.deliver_after) {
        micros = std::to_string(
            std::chrono::duration_cast<std::chrono::microseconds>(options.deliver_after->time_since_epoch()).count());
    }
    const char* deliver_after = options.deliver_after ? micros.c_str() : nullptr;
    const pqxx::result rows =
        options.traceparent || options.tracestate
            ? tx.exec_params("SELECT outbox_publish($1, $2, $3::jsonb, $4, $5, deliver_after => timestamptz 'epoch' + "
                             "$6::bigint * interval '1 microsecond', traceparent => $7, tracestate => $8)::text",
                             std::string(company_id), std::string(event_type), json, aggregate_key, dedup_key,
                             deliver_after,
                             // Only tracestate set: an empty traceparent, so the settings are not read.
                             options.traceparent ? options.traceparent->c_str() : "",
                             options.tracestate ? options.tracestate->c_str() : nullptr)
        : options.deliver_after
            ? tx.exec_params("SELECT outbox_publish($1, $2, $3::jsonb, $4, $5, deliver_after => timestamptz 'epoch' + "
                             "$6::bigint * interval '1 microsecond')::text",
                             std::string(company_id), std::string(event_type), json, aggregate_key, dedup_key,
                             deliver_after)
            : tx.exec_params("SELECT outbox_publish($1, $2, $3::jsonb, $4, $5)::text", std::string(company_id),
                             std::string(event_type), json, aggregate_key, dedup_key);
    const pqxx::field id = rows.at(0).at(0);
    return id.is_null() ? std::string() : id.as<std::string>();
}

/// One event of a publish_many() call.
struct PublishItem {
    std::string event_type;
    SafePayload payload;
    PublishOptions options{};
};

/// Publishes `events` inside `tx` through the SQL function outbox_publish_many() and returns
/// their event_ids in the order given (an empty string for a repeated dedup_key, as publish()).
/// The events are inserted in the order of their aggregate_key (byte order; unkeyed last),
/// each aggregate's events in the order given, so the aggregates' ordering locks, held until
/// `tx` ends, are taken in the same order by every caller: transactions that publish to
/// several aggregates this way never deadlock each other. Use one call per transaction for
/// all its keyed events; a transaction that also calls publish() for keyed events takes
/// those locks in its own order. Each event is checked exactly as by publish(); throws as
/// publish() does, and nothing of the batch is inserted then.
inline std::vector<std::string> publish_many(pqxx::dbtransaction& tx, std::string_view company_id,
                                             const std::vector<PublishItem>& events) {
    nlohmann::json array = nlohmann::json::array();
    for (const PublishItem& item : events) {
        // outbox_publish_many() takes no delivery time: refused, never silently dropped.
        if (item.options.deliver_after) {
            throw std::invalid_argument("publish_many() does not take deliver_after; publish a delayed event with publish()");
        }
        if (item.options.traceparent || item.options.tracestate) {
            throw std::invalid_argument(
                "publish_many() does not take a trace context per event; set outbox.traceparent for the transaction "
                "(SET LOCAL), which every event of the call takes");
        }
        nlohmann::json event{{"event_type", item.event_type}, {"payload", nlohmann::json::parse(item.payload.json())}};
        if (item.options.aggregate_key) {
            if (const char* rule = detail::free_text_rule(*item.options.aggregate_key)) {
                throw FreeTextError("aggregate_key", rule);
            }
            event["aggregate_key"] = *item.options.aggregate_key;
        }
        if (item.options.dedup_key) event["dedup_key"] = *item.options.dedup_key;
        array.push_back(std::move(event));
    }
    std::vector<std::string> ids;
    ids.reserve(events.size());
    for (const auto& row : tx.exec_params("SELECT p.id::text FROM outbox_publish_many($1, $2::jsonb) WITH ORDINALITY "
                                          "AS p(id, n) ORDER BY p.n",
                                          std::string(company_id), array.dump())) {
        ids.push_back(row[0].is_null() ? std::string() : row[0].as<std::string>());
    }
    return ids;
}

}  // namespace outbox::sdk
