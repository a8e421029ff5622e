#include "lease/retention.hpp"

#include <algorithm>

#include <pqxx/pqxx>

#include "db/db_session.hpp"
#include "db/event_sql.hpp"
#include "log/log.hpp"

namespace outbox::lease {
namespace {
// A pass stops between batches once it has run this long; a batch may then still take its
// statement timeout (30 s).
constexpr auto kPassBudget = std::chrono::minutes{2};
constexpr auto kPassBound = std::chrono::milliseconds{kPassBudget + std::chrono::seconds{35}};
}  // namespace

std::optional<Retention::Partitions> Retention::maintain_partitions(pqxx::connection& conn,
                                                                   std::optional<std::string> now, bool wait) const {
    const auto ahead = std::max<std::chrono::milliseconds>(history_partition_, std::chrono::minutes{10});
    pqxx::work tx(conn);
    if (wait) {
        tx.exec("SET LOCAL lock_timeout = '5s'");
        tx.exec_params("SELECT pg_advisory_xact_lock($1)", kLockKey);
    } else if (!tx.exec_params1("SELECT pg_try_advisory_xact_lock($1)", kLockKey)[0].as<bool>()) {
        return std::nullopt;
    }
    // Attaching or dropping a partition locks outbox_attempt briefly: never queue behind a
    // long transaction (and every writer behind this one); the next pass tries again.
    tx.exec("SET LOCAL lock_timeout = '2s'; SET LOCAL statement_timeout = '30s'");
    const auto row = tx.exec_params1(
        "SELECT created, dropped, moved, deleted FROM outbox_attempt_maintain($1::bigint * interval '1 millisecond', "
        "$2::bigint * interval '1 millisecond', $3::bigint * interval '1 millisecond', "
        "coalesce($4::timestamptz, now()))",
        static_cast<long long>(history_partition_.count()), static_cast<long long>(ahead.count()),
        static_cast<long long>(retention_.count()), now);
    tx.commit();
    return Partitions{row[0].as<int>(), row[1].as<int>(), row[2].as<long long>(), row[3].as<long long>()};
}

std::optional<long long> Retention::run_once(pqxx::connection& conn, std::stop_token stop,
                                             std::optional<std::string> now) const {
    // The lock is transaction-scoped, taken by every batch: it ends with the batch's own
    // transaction, so no server session (a pooler's, say) is left holding it.
    long long deleted = 0;
    bool first = true;
    const auto started = std::chrono::steady_clock::now();
    for (const std::string* sql : {&db::event_sql::kDeleteCompleted, &db::event_sql::kDeleteDiscarded}) {
        for (;;) {
            pqxx::work tx(conn);
            if (!tx.exec_params1("SELECT pg_try_advisory_xact_lock($1)", kLockKey)[0].as<bool>()) {
                // Another host is deleting: it carries on with the pass.
                if (first) return std::nullopt;
                return deleted;
            }
            first = false;
            tx.exec("SET LOCAL statement_timeout = '30s'");
            const auto n = tx.exec_params0(*sql, static_cast<long long>(retention_.count()), now, batch_).affected_rows();
            tx.commit();
            deleted += static_cast<long long>(n);
            if (n < static_cast<std::size_t>(batch_) || stop.stop_requested() ||
                std::chrono::steady_clock::now() - started > kPassBudget) {
                break;
            }
        }
        if (stop.stop_requested() || std::chrono::steady_clock::now() - started > kPassBudget) break;
    }
    return deleted;
}

void Retention::run(const std::string& url, db::OutageLog& outage, std::chrono::milliseconds interval,
                    std::stop_token stop) const {
    db::DbSession session(url, "retention", outage);
    const auto maintain = [&] {
        std::optional<Partitions> done;
        if (!session.run([&](pqxx::connection& conn) { done = maintain_partitions(conn); }, stop, kPassBound)) return;
        if (done && (done->created > 0 || done->dropped > 0 || done->moved > 0 || done->deleted > 0)) {
            log::info("attempt history: " + std::to_string(done->created) + " partition(s) created, " +
                      std::to_string(done->dropped) + " dropped, " + std::to_string(done->moved) +
                      " row(s) moved out of the default partition, " + std::to_string(done->deleted) +
                      " old default-partition row(s) deleted");
        }
    };
    // The first pass waits a second: a restarting host's first claim (a backlog may be
    // waiting) does not share the database with a retention DELETE and its connection.
    if (!db::sleep_for(std::chrono::seconds{1}, stop)) return;
    do {
        maintain();
        std::optional<long long> deleted;
        // A pass deletes in batches (30 s statement timeout each) for up to kPassBudget; the
        // host's guard bounds the whole pass.
        if (!session.run([&](pqxx::connection& conn) { deleted = run_once(conn, stop); }, stop, kPassBound)) continue;
        if (deleted && *deleted > 0) {
            log::info("retention deleted " + std::to_string(*deleted) + " COMPLETED or DISCARDED event(s) older than " +
                      std::to_string(retention_.count() / 1000) + "s");
        }
    } while (db::sleep_for(interval, stop));
}

}  // namespace outbox::lease
