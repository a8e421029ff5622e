#pragma once

// Statements every operator action on events shares.
namespace outbox::operations {

/// The SHA-256 (hex) of the idempotency key ($1) and of the canonical request ($2), as the
/// action record tables store them: a key is never kept in clear.
inline constexpr const char* kHashSql = R"SQL(
SELECT encode(sha256(convert_to($1, 'UTF8')), 'hex'), encode(sha256(convert_to($2, 'UTF8')), 'hex')
)SQL";

/// Wakes the hosts that handle event type $1: they claim a re-driven event at once.
inline constexpr const char* kNotifySql = "SELECT pg_notify('outboxd_events', $1)";

}  // namespace outbox::operations
