#include "operations/operation_runner.hpp"

#include "db/db_session.hpp"
#include "log/log.hpp"
#include "operations/operation_job.hpp"

namespace outbox::operations {

namespace {
constexpr std::chrono::milliseconds kReplayPause{200};
}  // namespace

OperationRunner::OperationRunner(std::string url, db::OutageLog& outage, std::chrono::milliseconds interval,
                                 int batch_size)
    : url_(std::move(url)), outage_(outage), interval_(interval), batch_size_(batch_size) {}

void OperationRunner::run(std::stop_token stop) {
    db::DbSession session(url_, "operator jobs", outage_);
    while (!stop.stop_requested()) {
        OperationBatch batch;
        // A failed batch has waited its backoff already; the next one starts from the cursor.
        if (!session.run([&](pqxx::connection& conn) { batch = work_operation_batch(conn, batch_size_); }, stop)) {
            continue;
        }
        if (batch.job_failed) {
            log::error("operator job " + batch.operation_id + " failed: a batch failed on an SQL error");
        } else if (batch.finished) {
            log::info("operator job " + batch.operation_id + " done");
        }
        // A replay waiting for its handler looks again soon; an idle runner at its interval.
        if (!batch.worked && !db::sleep_for(batch.deferred ? kReplayPause : interval_, stop)) return;
    }
}

}  // namespace outbox::operations
