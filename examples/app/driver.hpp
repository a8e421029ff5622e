#pragma once
// Runs numbered jobs against PostgreSQL at a steady rate on a few threads.

#include <atomic>
#include <functional>
#include <string>

#include <pqxx/pqxx>

namespace outbox::examples::app {

struct PaceOptions {
    long long count = 0;
    double rate = 0;      ///< jobs started per second; 0: as fast as possible
    int concurrency = 4;  ///< threads, each with its own connection
};

struct PaceResult {
    long long done = 0;
    long long failed = 0;
};

/// Runs job(i, connection) for i in [0, count), job i starting no earlier than i / rate
/// seconds after the start. A job that throws is counted as failed (the first few errors
/// are printed) and its thread reconnects if the connection broke. Returns early, after
/// the running jobs finish, once `stop` is true.
PaceResult run_paced(const std::string& database_url, const PaceOptions& options,
                     const std::function<void(long long, pqxx::connection&)>& job, const std::atomic<bool>& stop);

}  // namespace outbox::examples::app
