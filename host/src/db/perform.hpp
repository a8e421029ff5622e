#pragma once

#include <exception>
#include <functional>

#include "db/db_error.hpp"

namespace outbox::db {

/// When a failed unit of work is run again: at most `max_runs` runs in all, again only
/// when `retry` says so for the failure (classified by classify_db_error); `retry` may wait
/// (a backoff) before it answers. An in-doubt commit is never worth a rerun: re-read instead.
/// The policies: kOperatorTransaction here, DbSession::run's (bookkeeping) and the start-up
/// connection's (app/host.cpp).
struct RetryPolicy {
    int max_runs = 1;
    std::function<bool(const DbFailure&)> retry;
};

/// Runs `work()` and returns its result; a failure `policy` retries runs it again, any
/// other (or the last) propagates unchanged.
template <class Work>
auto perform(Work&& work, const RetryPolicy& policy) -> decltype(work()) {
    for (int run = 1;; ++run) {
        try {
            return work();
        } catch (...) {
            if (run >= policy.max_runs || !policy.retry || !policy.retry(classify_db_error(std::current_exception()))) {
                throw;
            }
        }
    }
}

/// An operator action's transaction (retry, discard, bulk re-drive): three runs, again when
/// PostgreSQL reports a serialization failure or a deadlock, or when a concurrent request
/// took the Idempotency-Key first (a unique violation: the next run finds its record).
inline const RetryPolicy kOperatorTransaction{3, [](const DbFailure& failure) {
                                                  return failure.sqlstate == "40001" || failure.sqlstate == "40P01" ||
                                                         failure.sqlstate == "23505";
                                              }};

}  // namespace outbox::db
