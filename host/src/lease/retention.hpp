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

    /// `history_partition`: the width of one outbox_attempt partition (outbox.history_partition).
    explicit Retention(std::chrono::milliseconds retention, int batch = kBatch,
                       std::chrono::milliseconds history_partition = std::chrono::hours{24})
        : retention_(retention), batch_(batch), history_partition_(history_partition) {}

    /// What one pass did to the attempt history's partitions.
    struct Partitions {
        int created = 0;
        int dropped = 0;
        long long moved = 0;    // rows moved out of the default partition into a new one
        long long deleted = 0;  // default-partition rows older than the retention
    };
    /// Creates the outbox_attempt partitions of the next max(width, 10 min) (and the current
    /// one), drops those older than the retention; one transaction under the retention lock.
    /// nullopt when another host holds the lock, unless `wait`: then it waits up to 5 s for
    /// it (a starting host, whose first outcomes need the current partition). `now`
    /// overrides the database clock (tests).
    std::optional<Partitions> maintain_partitions(pqxx::connection& conn, std::optional<std::string> now = std::nullopt,
                                                  bool wait = false) const;

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
    std::chrono::milliseconds history_partition_;
};

}  // namespace outbox::lease
