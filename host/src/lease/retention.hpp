#pragma once

#include <chrono>
#include <optional>
#include <stop_token>
#include <string>

#include <pqxx/connection>

#include "db/outage_log.hpp"

namespace outbox::lease {

/// Deletes COMPLETED and DISCARDED events (and, by ON DELETE CASCADE, their consumption rows) whose
/// completed_at is older than outbox.retention. Nothing else is ever deleted: not
/// REVIEW_REQUIRED, not anything unfinished, not the manual-retry or audit history.
/// One host at a time: each batch is one short transaction holding a transaction-scoped
/// advisory lock (nothing outlives it on a pooled server connection); a host that finds
/// the lock taken skips its pass.
class Retention {
public:
    static constexpr long long kLockKey = 0x6f7574626f78'7265;  // "outbox" "re"
    static constexpr int kBatch = 1000;

    Retention(std::chrono::milliseconds retention, int batch = kBatch) : retention_(retention), batch_(batch) {}

    /// One pass on `conn`: deletes in batches until none is left (or `stop`). Returns the
    /// number of rows deleted, or nullopt when another host holds the retention lock.
    /// `now` overrides the database clock (tests). Throws on database failure.
    std::optional<long long> run_once(pqxx::connection& conn, std::stop_token stop = {},
                                      std::optional<std::string> now = std::nullopt) const;

    /// Runs a pass at once and then every `interval` until `stop`, on its own connection,
    /// reconnecting with backoff; logs what it deleted.
    void run(const std::string& url, db::OutageLog& outage, std::chrono::milliseconds interval,
             std::stop_token stop) const;

private:
    std::chrono::milliseconds retention_;
    int batch_;
};

}  // namespace outbox::lease
