#pragma once

#include <stdexcept>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
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

/// A pending migration would break hosts that are still running (an offline migration, or one
/// that declares `compatible-with-hosts-from` above what live hosts need). what() is one line
/// naming the file, the hosts and what to do.
class MigrationRefused : public MigrationError {
public:
    using MigrationError::MigrationError;
};

/// The machine-readable header of a migration file: leading `--` comment lines
///   -- online: yes
///   -- online: no — <why it cannot run while hosts of the previous release run>
///   -- compatible-with-hosts-from: <n>   (optional: after this file only hosts that need
///                                        schema n or newer can run; default: every host)
struct MigrationHeader {
    bool has_online = false;   // an `online:` line was found
    bool online = false;
    std::string offline_reason;
    int hosts_from = 0;        // 0: every host stays compatible
};

/// Reads the header; throws MigrationError naming `file_name` when a header line is malformed
/// (an `online:` value other than yes / no with a reason, a non-numeric hosts-from).
MigrationHeader parse_migration_header(std::string_view file_name, std::string_view sql);

/// Files up to this version were written before the header convention and cannot change
/// (their checksums are recorded); they are all online (each says so in its prose).
inline constexpr int kLastVersionWithoutHeader = 9;

struct MigrateOptions {
    /// Apply offline migrations (and ones that leave live hosts behind) even while hosts of
    /// an older release are registered live in outbox_host (`outboxd migrate --offline`).
    bool allow_offline = false;
    /// How long to wait for another migrator's lock before failing with MigrationError
    /// naming its backend pid (callers pass database.startup_timeout); nullopt waits forever.
    std::optional<std::chrono::milliseconds> lock_wait;
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
    int hosts_from = 0;               // the database needs hosts that need at least this schema
    std::vector<std::string> pending;  // file names not applied yet, in order
};

/// Applies the versioned migrations V<n>__<name>.sql in order, each recorded with its
/// checksum in outbox_schema_history (transactions, search_path, no-transaction files and
/// the migration lock: docs/design.md, "Migrations").
class Migrator {
public:
    explicit Migrator(std::vector<EmbeddedMigration> migrations = embedded_migrations());

    /// Applies every pending migration; returns what was applied (empty when up to date).
    /// Throws MigrationError when an applied file's checksum differs from the embedded one
    /// or the database has a version this binary does not know.
    /// With role names (given now or stored by an earlier migrate), grants them their
    /// privileges after the migrations, every time; throws RoleError (before applying
    /// anything) when a named role does not exist.
    /// Throws MigrationRefused, before applying anything, when a pending migration is
    /// offline (or raises the hosts it stays compatible with) while live hosts of an older
    /// schema are registered, unless options.allow_offline.
    std::vector<AppliedMigration> migrate(pqxx::connection& conn, const RoleNames& roles = {},
                                          MigrateOptions options = {}) const;

    /// Reads the schema state without changing anything; throws MigrationError on
    /// checksum mismatch as migrate() does.
    SchemaStatus status(pqxx::connection& conn) const;

    /// The highest version this binary embeds: the schema version its hosts need.
    [[nodiscard]] int latest_version() const;

private:
    std::vector<EmbeddedMigration> migrations_;
};

}  // namespace outbox::db
