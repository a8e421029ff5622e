#pragma once

#include <string>

namespace outbox::db {

/// The ordering rule, written once for the claim, the gauges, `outboxd status` and the
/// event view: a row `earlier` of event_publication holds back the row `later` when both
/// belong to the same aggregate (company_id, aggregate_key), `earlier` comes first in it
/// and is unfinished (PENDING, PROCESSING, RETRY_WAIT) or waits for an operator
/// (REVIEW_REQUIRED). Events without a position (aggregate_seq NULL) are in no order.
/// A SQL condition on the aliases `earlier` and `later`.
inline std::string holds_back(const std::string& earlier, const std::string& later) {
    return earlier + ".company_id = " + later + ".company_id AND " + earlier + ".aggregate_key = " + later +
           ".aggregate_key AND " + earlier + ".aggregate_seq < " + later + ".aggregate_seq AND " + earlier +
           ".aggregate_seq IS NOT NULL AND " + earlier +
           ".status IN ('PENDING', 'PROCESSING', 'RETRY_WAIT', 'REVIEW_REQUIRED')";
}

/// When the row `alias` of event_publication became due: its publication, or the time its
/// publisher asked for (deliver_after) when that is later. Lateness is counted from here, so
/// a delayed event is not late before its time. A SQL expression.
inline std::string due_since(const std::string& alias) {
    return "greatest(" + alias + ".occurred_at, " + alias + ".deliver_after)";
}

}  // namespace outbox::db
