#include <pwd.h>
#include <unistd.h>

#include <iostream>

#include "admin/retry_service.hpp"
#include "app/commands.hpp"
#include "db/connection_pool.hpp"
#include "db/db_error.hpp"

namespace outbox::app {
namespace {

std::string os_user() {
    const uid_t uid = ::geteuid();
    if (const passwd* entry = ::getpwuid(uid); entry != nullptr && entry->pw_name != nullptr) return entry->pw_name;
    return "uid" + std::to_string(uid);
}

}  // namespace

int retry_command(const config::Config& config, const RetryArgs& args) {
    admin::RetryRequest request;
    request.event_id = args.event_id;
    request.expected_version = args.expected_version;
    request.reason = args.reason;
    request.idempotency_key = args.idempotency_key;
    request.actor = "cli:" + os_user();
    request.channel = "cli";
    try {
        auto conn = db::open_connection(config.database.url);
        const admin::RetryResult result = admin::RetryService(*conn).retry(request);
        if (const auto* accepted = std::get_if<admin::RetryAccepted>(&result)) {
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
        if (const auto* conflict = std::get_if<admin::RetryConflict>(&result)) {
            std::cerr << "outboxd retry: " << conflict->code << ": " << conflict->message << " (current status "
                      << conflict->current_status << ", version " << conflict->current_version << ")\n";
            return 1;
        }
        const auto& rejected = std::get<admin::RetryRejected>(result);
        if (rejected.kind == admin::RetryRejected::Kind::NotVisible) {
            std::cerr << "outboxd retry: EVENT_NOT_FOUND: no event with this id\n";
        } else {
            std::cerr << "outboxd retry: " << rejected.code << ": " << rejected.message << "\n";
        }
        return 1;
    } catch (const std::exception&) {
        const db::DbFailure failure = db::classify_db_error(std::current_exception());
        std::cerr << "outboxd retry: " << failure.describe()
                  << (failure.kind == db::DbFailureKind::InDoubt
                          ? "; run the same command again to learn the outcome"
                          : "; check database.url / OUTBOX_DATABASE_URL and run `outboxd migrate`")
                  << "\n";
        return 1;
    }
}

}  // namespace outbox::app
