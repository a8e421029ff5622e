#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include <pqxx/pqxx>

#include "db/embedded_migrations.hpp"

namespace outbox::db {

/// A migration problem an operator must fix (an edited applied file, an unknown version in
/// the database, a failing statement). what() is one clear sentence naming the file.
class MigrationError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct AppliedMigration {
    int version = 0;
    std::string file_name;
    long long duration_ms = 0;
};

/// Existing roles `outboxd migrate --runtime-role/--publisher-role` grants to. The names are
/// stored in outbox_role, so every later migrate re-grants them, tables added since included.
struct RoleNames {
    std::string runtime;    // empty: keep the stored one, if any
    std::string publisher;  // empty: keep the stored one, if any
};

/// A role named for grants does not exist; the command never creates roles.
class RoleError : public MigrationError {
public:
    using MigrationError::MigrationError;
};

struct SchemaStatus {
    int applied_version = 0;          // highest applied version, 0 for an empty database
    int latest_version = 0;           // highest version this binary embeds
    std::vector<std::string> pending;  // file names not applied yet, in order
};

/// Applies the versioned migrations V<n>__<name>.sql in order. Each file runs in its own
/// transaction together with its row in outbox_schema_history (version, file name,
/// SHA-256 checksum, applied_at, duration), with search_path = <target schema>, pg_temp
/// (the target is the connection's current_schema()), so functions declared SET search_path
/// FROM CURRENT look names up in pg_catalog (searched first when not named), then the
/// target schema, then pg_temp, and in no other schema. A file whose first line is
/// `-- outboxd: no-transaction` runs outside a transaction (CREATE INDEX CONCURRENTLY),
/// statement by statement (each ends with `;` at the end of a line; no dollar quoting);
/// before each `CREATE [UNIQUE] INDEX CONCURRENTLY IF NOT EXISTS name` an INVALID index of
/// that name (left by an earlier failed build) is dropped, so a failed file can be rerun.
/// A session-level advisory lock makes two hosts migrating at once safe: the second waits
/// and then finds nothing to do.
class Migrator {
public:
    explicit Migrator(std::vector<EmbeddedMigration> migrations = embedded_migrations());

    /// Applies every pending migration; returns what was applied (empty when up to date).
    /// Throws MigrationError when an applied file's checksum differs from the embedded one
    /// or the database has a version this binary does not know.
    /// With role names (given now or stored by an earlier migrate), grants them their
    /// privileges after the migrations, every time; throws RoleError (before applying
    /// anything) when a named role does not exist.
    std::vector<AppliedMigration> migrate(pqxx::connection& conn, const RoleNames& roles = {}) const;

    /// Reads the schema state without changing anything; throws MigrationError on
    /// checksum mismatch as migrate() does.
    SchemaStatus status(pqxx::connection& conn) const;

private:
    std::vector<EmbeddedMigration> migrations_;
};

}  // namespace outbox::db
