#pragma once

#include <chrono>
#include <stop_token>
#include <string>

#include "db/outage_log.hpp"

namespace outbox::operations {

/// Works the operator jobs of the whole fleet: every host runs one, and each batch is
/// claimed by locking its job's row (work_operation_batch), so hosts share the jobs and a
/// job outlives the host that started it. Batches follow each other at once while there is
/// work; with none, the runner looks again every `interval`. A batch that fails on an SQL
/// error (not a lost connection or a timeout, which are retried) fails its job.
class OperationRunner {
public:
    OperationRunner(std::string url, db::OutageLog& outage, std::chrono::milliseconds interval,
                    int batch_size);

    void run(std::stop_token stop);

private:
    std::string url_;
    db::OutageLog& outage_;
    std::chrono::milliseconds interval_;
    int batch_size_;
};

}  // namespace outbox::operations
