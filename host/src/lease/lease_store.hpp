#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include <pqxx/connection>
#include <pqxx/transaction_base>

#include "core/transition.hpp"
#include "outbox/sdk/context.hpp"
#include "outbox/sdk/event.hpp"

namespace outbox::lease {

/// An event this host now owns: the event itself, the fencing token of this claim, and the
/// handlers that already consumed it in an earlier attempt (they are skipped).
struct ClaimedEvent {
    sdk::Event event;
    sdk::TraceContext trace;  // as published; empty when none
    std::string lease_token;
    std::vector<std::string> consumed_by;
    std::string replay_handler;  // an operator's replay: only this handler runs; empty otherwise
};

/// One parking pass: due rows read, events parked.
struct ParkPass {
    int read = 0;
    int parked = 0;
};

/// Who holds a lease: the host's id (outbox.host_id, shown as lease_owner) and the
/// incarnation of its process, drawn at start. Two live processes may share an id (a shared
/// configuration, or `node:1` in PID namespaces); their incarnations tell them apart.
struct LeaseOwner {
    std::string host_id;
    std::string incarnation;  // empty: the claim records none (tools and tests)
};

/// A new incarnation: 16 random hex digits.
std::string new_incarnation();

/// The identity of one lease: every write out of PROCESSING names both.
struct LeaseRef {
    std::string event_id;
    std::string lease_token;
};

/// One handler call of an attempt, as outbox_attempt records it (outbox.attempt_history).
struct AttemptCall {
    std::string handler;
    std::chrono::system_clock::time_point started;
    std::chrono::system_clock::time_point ended;
    std::string outcome;  // succeeded, retry, review_required or timeout
    std::string error_code;
};

/// Which handler calls outbox_attempt records.
enum class AttemptHistory { All, Failures, Off };
AttemptHistory attempt_history_of(const std::string& setting);
/// Whether `mode` records a call with `outcome`.
inline bool records(AttemptHistory mode, const std::string& outcome) {
    return mode == AttemptHistory::All || (mode == AttemptHistory::Failures && outcome != "succeeded");
}
/// What a host records, and as whom.
struct AttemptRecording {
    AttemptHistory mode = AttemptHistory::All;
    std::string host;
};

/// The INSERT of `calls`' outbox_attempt rows (at least one), with literals (it travels
/// with a fence and its COMMIT in one simple query).
std::string attempt_insert_statement(pqxx::connection_base& conn, const sdk::Event& event, const std::string& host,
                                     const std::vector<AttemptCall>& calls);

/// The decided end of one attempt, to be persisted.
struct Finish {
    LeaseRef lease;
    core::Transition transition;
    /// Handlers that succeeded without opening ctx.db(): their consumption rows are written
    /// by the same statement, only if the fenced update applies.
    std::vector<std::string> consumed_by;
    /// The attempt's calls to record, written by the same statement if the update applies.
    std::vector<AttemptCall> calls;
};

enum class ClaimKind {
    Normal,   // due PENDING/RETRY_WAIT events, except suspects
    Suspect,  // one due RETRY_WAIT event whose previous host died mid-attempt (WORKER_LOST)
};

/// How claims share the fleet between companies (config tenants.*, docs/design.md "Fair
/// tenants"). Companies not listed weigh 1 and are capped by `default_cap`.
struct TenantShares {
    std::vector<std::string> companies;
    std::vector<int> weights;
    std::vector<int> caps;  // 0: the default cap
    int default_cap = 0;    // 0: unlimited
    /// Whether any company is capped: claims then take the fleet's tenant lock.
    [[nodiscard]] bool capped() const;
};
TenantShares tenant_shares_of(const std::map<std::string, int>& weights, const std::map<std::string, int>& caps,
                              int default_cap);

/// Where a host's next fair claim starts, and what its last one found.
struct FairCursor {
    std::string after;      // the company the previous claim reached; "": from the first
    bool more_due = false;  // the last claim filled the limit or some company's share
};

/// Persists lease state with fenced SQL. Every method is one statement (atomic on its own)
/// on the connection it was given, except a claim while a company is capped (the fleet's
/// tenant lock, then the claim, in one transaction); it prepares its statements on first use.
/// Not thread-safe: one LeaseStore per connection/thread.
class LeaseStore {
public:
    explicit LeaseStore(pqxx::connection& conn);

    /// Claims up to `limit` due PENDING/RETRY_WAIT events of `event_types` with FOR UPDATE
    /// SKIP LOCKED: attempt_count + 1, a new lease_token, lease_expires_at = now + lease.
    /// Commits before returning, so no lock is held while handlers run.
    /// Suspects are never part of a Normal claim; a Suspect claim takes at most one.
    /// A Normal claim is fair between companies (event_sql::kClaimFair): without `tenants`,
    /// every company weighs 1 and none is capped; without `cursor`, it starts at the first.
    std::vector<ClaimedEvent> claim(const std::vector<std::string>& event_types, int limit, const LeaseOwner& owner,
                                    std::chrono::milliseconds lease, ClaimKind kind = ClaimKind::Normal,
                                    const TenantShares* tenants = nullptr, FairCursor* cursor = nullptr);

    /// Applies a batch of attempt outcomes in one statement. Returns the lease tokens whose
    /// fenced update applied; the others had lost their lease and were left untouched.
    /// `host` is recorded as the host of the batch's calls.
    std::vector<std::string> finish(const std::vector<Finish>& batch, const std::string& host = {});

    /// Extends the leases still held; returns the lease tokens still owned (the rest are lost).
    std::vector<std::string> extend(const std::vector<LeaseRef>& leases, std::chrono::milliseconds lease);

    /// Gives back claimed events whose handlers never started (shutdown): the attempt is
    /// not counted and the event is due again at once. Returns how many were released.
    int release(const std::vector<LeaseRef>& leases);

    /// Releases (as release() does) the PROCESSING rows of `owner` (host id and incarnation:
    /// never another live process's, nor a former process's with the same id) claimed at or
    /// after `since` (server time, from server_time()) whose token is not in `tracked_tokens`:
    /// leases whose claim answer or stored outcome was lost with a connection (a failover
    /// loses asynchronously committed bookkeeping). The caller must not have a claim in
    /// flight. Returns how many were released.
    int release_untracked(const LeaseOwner& owner, const std::string& since,
                          const std::vector<std::string>& tracked_tokens);

    /// The server's clock (now(), as text).
    std::string server_time();

    /// Moves up to `limit` PROCESSING rows whose lease expired to RETRY_WAIT (due now, code
    /// WORKER_LOST), or to REVIEW_REQUIRED when attempt_count >= max_attempts. When the lost
    /// host was running a suspect, only the suspect keeps the attempt: the events beside it
    /// get theirs back. Returns the number of rows moved.
    /// With `record`, each rescued attempt gets an outbox_attempt row (outcome worker_lost,
    /// the lost host, from its claim to now).
    int rescue_expired(int max_attempts, int limit, bool record = true);

    /// Parks (next_attempt_at = 'infinity') the PENDING events among the first `window` due
    /// rows that have been due for at least `min_wait` and are held back by an earlier event
    /// of their aggregate, so claims stop reading them (review F8). The trigger of migration
    /// V22 releases the first one when the event ahead of it finishes.
    ParkPass park_blocked(int window, std::chrono::milliseconds min_wait);

    /// Releases every parked event that nothing holds back any more: the sweep behind V22's
    /// trigger, for two events of one aggregate finishing at the same moment. Reads one
    /// parked aggregate per index descent, `aggregates_per_statement` per statement. Returns
    /// how many were released.
    int release_parked(int aggregates_per_statement = 1000);

    /// The statements take `at` (a timestamptz, e.g. "2027-01-01 00:00:00+00") as the
    /// current time instead of the server's now(): tests move time with it. Empty (the
    /// default): the server's clock.
    void set_time(std::string at) { time_ = std::move(at); }

private:
    pqxx::connection& conn_;
    std::string time_;
};

/// The fence a handler transaction runs just before its commit (outbox_fence(), migration
/// V5): if and only if `lease` is still this host's, it locks the event row (so a takeover
/// waits for this commit) and records every handler in `handler_names` as a consumer; with
/// `complete`, it also moves the event to COMPLETED (the last handler of a clean attempt,
/// so the event costs no separate outcome write). A lost lease fails the statement with
/// SQLSTATE kLeaseLostSqlstate. Returned as SQL text with literal values, to be sent
/// together with the COMMIT in one round trip.
std::string fence_statement(pqxx::connection_base& conn, const LeaseRef& lease,
                            const std::vector<std::string>& handler_names, bool complete);
inline constexpr const char* kLeaseLostSqlstate = "OB001";

}  // namespace outbox::lease
