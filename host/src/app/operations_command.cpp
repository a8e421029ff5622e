#include <chrono>
#include <iostream>
#include <thread>

#include <nlohmann/json.hpp>

#include "app/commands.hpp"
#include "core/identifiers.hpp"
#include "db/connection_pool.hpp"
#include "db/db_error.hpp"
#include "operations/operation_job.hpp"

namespace outbox::app {
namespace {

int db_failure(const char* command) {
    const db::DbFailure failure = db::classify_db_error(std::current_exception());
    std::cerr << "outboxd operations " << command << ": " << failure.describe()
              << (failure.kind == db::DbFailureKind::InDoubt
                      ? "; run the same command again (with the same --idempotency-key) to learn the outcome"
                      : "; check database.url / OUTBOX_DATABASE_URL and run `outboxd migrate`")
              << "\n";
    return 1;
}

void print_status(const operations::OperationStatus& s) {
    std::cout << "operation " << s.operation_id << " (" << s.action << "): " << s.state << ", " << s.done << " of "
              << s.total << " done, " << s.failed << " failed";
    if (s.error) std::cout << " (" << *s.error << ")";
    std::cout << "\n";
}

operations::OperationRequest request_from(const OperationArgs& args) {
    operations::OperationRequest request;
    request.action = args.action;
    request.filter = {args.event_type, args.code,          args.no_code,       args.status,
                      args.after,      args.before,        args.aggregate_key, args.handler};
    // A replay names the handler to run again; it selects no events by it.
    if (args.action == "replay") {
        request.handler = args.handler;
        request.filter.handler = std::nullopt;
    }
    request.reason = args.reason;
    request.dry_run = args.dry_run;
    request.idempotency_key = args.idempotency_key;
    request.actor = cli_actor();
    request.company_id = args.company;
    request.channel = "cli";
    return request;
}

// Works the job's batches here until it is over (hosts that run share them); prints progress.
int work_until_over(pqxx::connection& conn, const std::string& id) {
    bool said_waiting = false;
    for (;;) {
        const auto batch = operations::work_operation_batch(conn, operations::kOperationBatchSize, id);
        const auto status = operations::read_operation(conn, id, std::nullopt);
        if (!status) return 1;
        if (status->state != "running") {
            print_status(*status);
            return status->state == "done" ? 0 : 1;
        }
        if (batch.worked) {
            // Flushed: progress is for someone watching, through a pipe or a log too.
            std::cout << "  " << status->done << " of " << status->total << " done, " << status->failed << " failed\n"
                      << std::flush;
            said_waiting = false;
        } else if (batch.deferred) {
            // A replay goes at its handler's pace; without a running host it does not move.
            if (!said_waiting) {
                std::cout << "  waiting for the handler to finish the replayed events so far (hosts run them; "
                             "stopping this command leaves the job to the hosts)\n"
                          << std::flush;
                said_waiting = true;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
        } else {
            // Another process holds the job's batch right now: wait for it briefly.
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
        }
    }
}

}  // namespace

int operations_start_command(const config::Config& config, const OperationArgs& args) {
    const operations::OperationRequest request = request_from(args);
    if (!request.dry_run && request.idempotency_key.empty()) {
        std::cerr << "outboxd operations start: --idempotency-key is required (unless --dry-run): a key unique to "
                     "this decision, so that repeating the command starts nothing twice\n";
        return 2;
    }
    try {
        auto conn = db::open_connection(config.database.url);
        const auto result = operations::start_operation(*conn, request);
        if (const auto* rejected = std::get_if<operations::RetryRejected>(&result)) {
            std::cerr << "outboxd operations start: " << rejected->code << ": " << rejected->message << "\n";
            return 1;
        }
        if (const auto* preview = std::get_if<operations::OperationPreview>(&result)) {
            std::cout << preview->count << " event(s) match; nothing changed (dry run)\n";
            for (const auto& id : preview->sample_event_ids) std::cout << id << "\n";
            return 0;
        }
        const auto& started = std::get<operations::OperationStarted>(result);
        std::cout << "operation " << started.operation_id
                  << (started.replayed ? ": already started with this idempotency key and the same request\n"
                                       : " started\n");
        if (args.detach) return 0;
        return work_until_over(*conn, started.operation_id);
    } catch (const std::exception&) {
        return db_failure("start");
    }
}

int operations_show_command(const config::Config& config, const std::string& id, const std::string& format) {
    try {
        auto conn = db::open_connection(config.database.url);
        const auto status = core::is_uuid(id) ? operations::read_operation(*conn, id, std::nullopt) : std::nullopt;
        if (!status) {
            std::cerr << "outboxd operations show: OPERATION_NOT_FOUND: no operation with this id\n";
            return 1;
        }
        if (format == "json") {
            std::cout << operations::to_json(*status).dump() << "\n";
        } else {
            print_status(*status);
        }
        return 0;
    } catch (const std::exception&) {
        return db_failure("show");
    }
}

int operations_list_command(const config::Config& config, const std::optional<std::string>& state, int limit,
                            const std::string& format) {
    try {
        auto conn = db::open_connection(config.database.url);
        const auto jobs = operations::list_operations(*conn, std::nullopt, state, limit);
        if (format == "json") {
            nlohmann::json list = nlohmann::json::array();
            for (const auto& job : jobs) list.push_back(operations::to_json(job));
            std::cout << nlohmann::json{{"operations", list}}.dump() << "\n";
        } else if (jobs.empty()) {
            std::cout << "no operation" << (state ? " in state " + *state : std::string()) << "\n";
        } else {
            for (const auto& job : jobs) {
                std::cout << job.created_at << "  ";
                print_status(job);
            }
        }
        return 0;
    } catch (const std::exception&) {
        return db_failure("list");
    }
}

int operations_cancel_command(const config::Config& config, const std::string& id) {
    try {
        auto conn = db::open_connection(config.database.url);
        const auto cancelled =
            core::is_uuid(id) ? operations::cancel_operation(*conn, id, std::nullopt, cli_actor(), "cli") : std::nullopt;
        if (!cancelled) {
            std::cerr << "outboxd operations cancel: OPERATION_NOT_FOUND: no operation with this id\n";
            return 1;
        }
        if (!cancelled->changed) std::cout << "already over; nothing changed: ";
        print_status(cancelled->status);
        return 0;
    } catch (const std::exception&) {
        return db_failure("cancel");
    }
}

}  // namespace outbox::app
