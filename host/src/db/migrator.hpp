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

struct SchemaStatus {
    int applied_version = 0;          // highest applied version, 0 for an empty database
    int latest_version = 0;           // highest version this binary embeds
    std::vector<std::string> pending;  // file names not applied yet, in order
};

/// Applies the versioned migrations V<n>__<name>.sql in order. Each file runs in its own
/// transaction together with its row in outbox_schema_history (version, file name,
/// SHA-256 checksum, applied_at, duration). A session-level advisory lock makes two hosts
/// migrating at once safe: the second waits and then finds nothing to do.
class Migrator {
public:
    explicit Migrator(std::vector<EmbeddedMigration> migrations = embedded_migrations());

    /// Applies every pending migration; returns what was applied (empty when up to date).
    /// Throws MigrationError when an applied file's checksum differs from the embedded one
    /// or the database has a version this binary does not know.
    std::vector<AppliedMigration> migrate(pqxx::connection& conn) const;

    /// Reads the schema state without changing anything; throws MigrationError on
    /// checksum mismatch as migrate() does.
    SchemaStatus status(pqxx::connection& conn) const;

private:
    std::vector<EmbeddedMigration> migrations_;
};

}  // namespace outbox::db
