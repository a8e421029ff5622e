#include <iostream>
#include <random>

#include "app/commands.hpp"
#include "db/connection_pool.hpp"
#include "db/db_error.hpp"
#include "operations/bulk_retry_service.hpp"
#include "operations/retry_service.hpp"

namespace outbox::app {
namespace {

int db_failure() {
    const db::DbFailure failure = db::classify_db_error(std::current_exception());
    std::cerr << "outboxd retry: " << failure.describe()
              << (failure.kind == db::DbFailureKind::InDoubt
                      ? "; run the same command again (with the same --idempotency-key) to learn the outcome"
                      : "; check database.url / OUTBOX_DATABASE_URL and run `outboxd migrate`")
              << "\n";
    return 1;
}

std::string new_key() {
    std::random_device random;
    std::string key = "cli-";
    for (int i = 0; i < 8; ++i) {
        char part[9];
        std::snprintf(part, sizeof part, "%08x", random());
        key += part;
    }
    return key.substr(0, 36);
}

int bulk_retry(const config::Config& config, const RetryArgs& args) {
    operations::BulkRetryRequest request;
    request.filter.event_type = args.event_type;
    request.filter.last_error_code = args.code;
    request.filter.occurred_before = args.before;
    if (args.limit) request.filter.limit = *args.limit;
    request.reason = args.reason;
    const bool own_key = args.idempotency_key.empty();
    request.idempotency_key = own_key ? new_key() : args.idempotency_key;
    request.actor = cli_actor();
    request.channel = "cli";
    try {
        auto conn = db::open_connection(config.database.url);
        const operations::BulkRetryResult result = operations::BulkRetryService(*conn).retry(request);
        if (const auto* rejected = std::get_if<operations::RetryRejected>(&result)) {
            std::cerr << "outboxd retry: " << rejected->code << ": " << rejected->message << "\n";
            return 1;
        }
        const auto& accepted = std::get<operations::BulkRetryAccepted>(result);
        if (accepted.replayed) {
            std::cout << "already done with this idempotency key and the same request; nothing done now. ";
        }
        std::cout << accepted.event_ids.size() << " event(s) re-driven: status PENDING, attempt_count 0\n";
        for (const auto& id : accepted.event_ids) std::cout << id << "\n";
        if (own_key) std::cout << "idempotency key: " << request.idempotency_key << "\n";
        return 0;
    } catch (const std::exception&) {
        if (own_key) std::cerr << "outboxd retry: idempotency key was " << request.idempotency_key << "\n";
        return db_failure();
    }
}

}  // namespace

int retry_command(const config::Config& config, const RetryArgs& args) {
    const bool bulk_options = args.event_type || args.code || args.before || args.limit;
    if (args.event_id.empty()) {
        if (!args.event_type && !args.code) {
            std::cerr << "outboxd retry: give EVENT_ID, or --event-type and/or --code to re-drive a group\n";
            return 2;
        }
        if (args.expected_version) {
            std::cerr << "outboxd retry: --expected-version is for one event (EVENT_ID)\n";
            return 2;
        }
        return bulk_retry(config, args);
    }
    if (bulk_options) {
        std::cerr << "outboxd retry: --event-type, --code, --before and --limit re-drive a group; not with EVENT_ID\n";
        return 2;
    }
    if (!args.expected_version || args.idempotency_key.empty()) {
        std::cerr << "outboxd retry: EVENT_ID needs --expected-version and --idempotency-key\n";
        return 2;
    }
    operations::RetryRequest request;
    request.event_id = args.event_id;
    request.expected_version = *args.expected_version;
    request.reason = args.reason;
    request.idempotency_key = args.idempotency_key;
    request.actor = cli_actor();
    request.channel = "cli";
    try {
        auto conn = db::open_connection(config.database.url);
        const operations::RetryResult result = operations::RetryService(*conn).retry(request);
        if (const auto* accepted = std::get_if<operations::RetryAccepted>(&result)) {
            if (accepted->replayed) {
                std::cout << "event " << accepted->event_id
                          << ": already re-driven with this idempotency key and the same request; nothing done now "
                             "(status PENDING, version "
                          << accepted->version << ")\n";
            } else {
                std::cout << "event " << accepted->event_id << " re-driven: status PENDING, attempt_count 0, version "
                          << accepted->version << "\n";
            }
            return 0;
        }
        if (const auto* conflict = std::get_if<operations::RetryConflict>(&result)) {
            std::cerr << "outboxd retry: " << conflict->code << ": " << conflict->message << " (current status "
                      << conflict->current_status << ", version " << conflict->current_version << ")\n";
            return 1;
        }
        const auto& rejected = std::get<operations::RetryRejected>(result);
        if (rejected.kind == operations::RetryRejected::Kind::NotVisible) {
            std::cerr << "outboxd retry: EVENT_NOT_FOUND: no event with this id\n";
        } else {
            std::cerr << "outboxd retry: " << rejected.code << ": " << rejected.message << "\n";
        }
        return 1;
    } catch (const std::exception&) {
        return db_failure();
    }
}

}  // namespace outbox::app
