#include "db/migrator.hpp"

#include "db/db_error.hpp"
#include "db/pg_array.hpp"
#include "db/role_rights.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <map>
#include <optional>
#include <string_view>
#include <thread>
#include <utility>

namespace outbox::db {
namespace {

// One fixed key for every outboxd ("outbox" in ASCII). Advisory locks are scoped to the
// current database, so hosts migrating different databases never wait for each other.
constexpr long long kMigrationLockKey = 0x6f7574626f78;

constexpr const char* kCreateHistory = R"sql(
CREATE TABLE IF NOT EXISTS outbox_schema_history (
    version     integer     PRIMARY KEY,
    file_name   text        NOT NULL,
    checksum    text        NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now(),
    duration_ms bigint      NOT NULL
))sql";
constexpr const char* kHistoryExists = "SELECT to_regclass('outbox_schema_history') IS NOT NULL";
constexpr const char* kSelectHistory = "SELECT version, file_name, checksum FROM outbox_schema_history ORDER BY version";
constexpr const char* kInsertHistory =
    "INSERT INTO outbox_schema_history (version, file_name, checksum, duration_ms) VALUES ($1, $2, $3, $4)";
// Written when the history table has the column (V12 adds it): the oldest host schema that
// stays compatible after the file, from its `compatible-with-hosts-from` header.
constexpr const char* kHasHostsFrom = R"sql(
SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute
               WHERE attrelid = 'outbox_schema_history'::regclass AND attname = 'compatible_with_hosts_from'
                 AND NOT attisdropped))sql";
constexpr const char* kInsertHistoryWithHostsFrom =
    "INSERT INTO outbox_schema_history (version, file_name, checksum, duration_ms, compatible_with_hosts_from) "
    "VALUES ($1, $2, $3, $4, nullif($5, 0))";
// to_jsonb reads the column when it exists and gives NULL before V12.
constexpr const char* kRequiredHostSchema =
    "SELECT coalesce(max((to_jsonb(h) ->> 'compatible_with_hosts_from')::integer), 0) FROM outbox_schema_history h";
// Live hosts as the fleet view counts them (outboxd status); schema 0 for hosts that do not
// record one (releases before V12).
constexpr const char* kLiveHosts = R"sql(
SELECT host_id, version, coalesce((to_jsonb(h) ->> 'schema_needed')::integer, 0)
FROM outbox_host h
WHERE stopped_at IS NULL AND last_heartbeat_at > now() - 3 * heartbeat_interval_ms * interval '1 millisecond'
ORDER BY host_id)sql";
constexpr const char* kFleetExists = "SELECT to_regclass('outbox_host') IS NOT NULL";
// Computed by the server so the binary needs no crypto library; the text is hashed as UTF-8.
// Every file in one statement: a host's start-up waits for this, once per file it cost a
// round trip.
constexpr const char* kChecksums =
    "SELECT encode(sha256(convert_to(t, 'UTF8')), 'hex') FROM pg_catalog.unnest($1::text[]) WITH ORDINALITY AS f(t, i) "
    "ORDER BY i";

// First line of a migration that must run outside a transaction (CREATE INDEX CONCURRENTLY).
constexpr std::string_view kNoTransactionMarker = "-- outboxd: no-transaction";

struct Migration {
    int version = 0;
    std::string file_name;
    std::string sql;
    MigrationHeader header;
    [[nodiscard]] bool transactional() const {
        const std::string_view text = sql;
        const auto first_line = text.substr(0, text.find('\n'));
        return first_line.substr(0, first_line.find_last_not_of(" \t\r") + 1) != kNoTransactionMarker;
    }
};

struct LiveHost {
    std::string host_id;
    std::string release;
    int schema_needed = 0;
};

std::string_view trim(std::string_view text) {
    const auto first = text.find_first_not_of(" \t\r");
    if (first == std::string_view::npos) return {};
    const auto last = text.find_last_not_of(" \t\r");
    return text.substr(first, last - first + 1);
}

struct HistoryRow {
    std::string file_name;
    std::string checksum;
};

// V<n>__<name>.sql, n a positive integer, name of letters, digits, '_' and '-'.
std::optional<int> parse_version(std::string_view file_name) {
    constexpr std::string_view kSuffix = ".sql";
    if (file_name.size() < 1 + kSuffix.size() || file_name.front() != 'V' || !file_name.ends_with(kSuffix)) {
        return std::nullopt;
    }
    const std::string_view stem = file_name.substr(1, file_name.size() - 1 - kSuffix.size());
    const auto separator = stem.find("__");
    if (separator == std::string_view::npos || separator == 0 || separator + 2 == stem.size()) return std::nullopt;
    const std::string_view digits = stem.substr(0, separator);
    const std::string_view name = stem.substr(separator + 2);
    int version = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), version);
    if (error != std::errc{} || end != digits.data() + digits.size() || version <= 0) return std::nullopt;
    const bool name_ok = std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    });
    if (!name_ok) return std::nullopt;
    return version;
}

std::vector<Migration> validated(const std::vector<EmbeddedMigration>& embedded) {
    std::vector<Migration> migrations;
    migrations.reserve(embedded.size());
    for (const auto& file : embedded) {
        const auto version = parse_version(file.file_name);
        if (!version) {
            throw MigrationError("migration file name '" + std::string(file.file_name) +
                                 "' is malformed; expected V<n>__<name>.sql, e.g. V2__add_index.sql");
        }
        MigrationHeader header = parse_migration_header(file.file_name, file.sql);
        if (!header.has_online && *version > kLastVersionWithoutHeader) {
            // The header test refuses such a file; a build that has one anyway treats it as
            // offline, the safe reading.
            header.online = false;
            header.offline_reason = "its file has no '-- online:' header";
        } else if (!header.has_online) {
            header.online = true;
        }
        migrations.push_back({*version, std::string(file.file_name), std::string(file.sql), std::move(header)});
    }
    std::sort(migrations.begin(), migrations.end(),
              [](const Migration& a, const Migration& b) { return a.version < b.version; });
    for (std::size_t i = 1; i < migrations.size(); ++i) {
        if (migrations[i].version == migrations[i - 1].version) {
            throw MigrationError("migrations " + migrations[i - 1].file_name + " and " + migrations[i].file_name +
                                 " have the same version " + std::to_string(migrations[i].version) +
                                 "; every file needs its own version number");
        }
    }
    return migrations;
}

std::string trimmed(std::string_view text) {
    const auto begin = text.find_first_not_of(" \t\r\n");
    if (begin == std::string_view::npos) return {};
    return std::string(text.substr(begin, text.find_last_not_of(" \t\r\n") - begin + 1));
}

// A no-transaction file's statements: each ends with ';' at the end of a line; whole-line
// comments are skipped. A multi-statement query string would run as one implicit
// transaction, which CREATE INDEX CONCURRENTLY refuses.
std::vector<std::string> split_statements(std::string_view sql) {
    std::vector<std::string> statements;
    std::string current;
    while (!sql.empty()) {
        const auto end = sql.find('\n');
        const std::string line = trimmed(sql.substr(0, end));
        sql = end == std::string_view::npos ? std::string_view{} : sql.substr(end + 1);
        if (line.empty() || line.starts_with("--")) continue;
        current += line + "\n";
        if (line.back() == ';') {
            statements.push_back(std::move(current));
            current.clear();
        }
    }
    if (!trimmed(current).empty()) statements.push_back(std::move(current));
    return statements;
}

// The index name of `CREATE [UNIQUE] INDEX CONCURRENTLY IF NOT EXISTS name ...`, if the
// statement is one (unquoted names only, folded to lower case as PostgreSQL does).
std::optional<std::string> concurrent_index_name(const std::string& statement) {
    std::vector<std::string> words;
    std::string word;
    for (const char c : statement) {
        if (std::isspace(static_cast<unsigned char>(c)) != 0) {
            if (!word.empty()) words.push_back(std::move(word));
            word.clear();
            if (words.size() == 8) break;
        } else {
            word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        }
    }
    if (!word.empty()) words.push_back(std::move(word));
    std::size_t i = 0;
    const auto next_is = [&](std::string_view expected) { return i < words.size() && words[i] == expected && ++i; };
    if (!next_is("create")) return std::nullopt;
    next_is("unique");
    if (!(next_is("index") && next_is("concurrently") && next_is("if") && next_is("not") && next_is("exists"))) {
        return std::nullopt;
    }
    if (i >= words.size() || words[i].find('"') != std::string::npos) return std::nullopt;
    return words[i];
}

std::string short_hash(const std::string& checksum) { return checksum.substr(0, 12) + "…"; }

// PostgreSQL's message can quote the values a statement touched, so only the SQLSTATE
// leaves here; running the file with psql shows the whole message. Called in a catch block.
MigrationError failed_migration(const std::string& file_name, bool transactional = true) {
    return MigrationError("migration " + file_name +
                          (transactional ? " failed and was rolled back: "
                                         : " failed (it runs outside a transaction; its statements are "
                                           "idempotent, so run migrate again once the cause is fixed): ") +
                          classify_db_error(std::current_exception()).describe() +
                          "; run the file with psql against a copy of the database to see PostgreSQL's message");
}

std::map<int, HistoryRow> read_history(pqxx::transaction_base& tx) {
    std::map<int, HistoryRow> history;
    for (const auto& row : tx.exec(kSelectHistory)) {
        history.emplace(row[0].as<int>(), HistoryRow{row[1].as<std::string>(), row[2].as<std::string>()});
    }
    return history;
}

std::vector<std::string> checksums(pqxx::transaction_base& tx, const std::vector<Migration>& migrations) {
    std::vector<std::string> texts;
    texts.reserve(migrations.size());
    for (const auto& migration : migrations) texts.push_back(migration.sql);
    std::vector<std::string> sums;
    sums.reserve(migrations.size());
    for (const auto& row : tx.exec_params(kChecksums, pg_array(texts))) sums.push_back(row[0].as<std::string>());
    if (sums.size() != migrations.size()) throw std::runtime_error("checksum count mismatch");
    return sums;
}

void verify_applied(const std::vector<Migration>& migrations, const std::vector<std::string>& sums,
                    const std::map<int, HistoryRow>& history) {
    for (std::size_t i = 0; i < migrations.size(); ++i) {
        const auto applied = history.find(migrations[i].version);
        if (applied != history.end() && applied->second.checksum != sums[i]) {
            throw MigrationError("migration " + migrations[i].file_name +
                                 " was edited after it was applied (checksum " + short_hash(applied->second.checksum) +
                                 " in the database, " + short_hash(sums[i]) +
                                 " in this outboxd); restore the original file and add a new migration instead");
        }
    }
}

void verify_known(const std::vector<Migration>& migrations, const std::map<int, HistoryRow>& history) {
    const int latest = migrations.empty() ? 0 : migrations.back().version;
    for (const auto& [version, row] : history) {
        const bool known = std::any_of(migrations.begin(), migrations.end(),
                                       [version = version](const Migration& m) { return m.version == version; });
        if (known) continue;
        if (version > latest) {
            throw MigrationError("the database is newer than this outboxd: it has migration " + row.file_name +
                                 " applied, but this outboxd only knows up to version " + std::to_string(latest) +
                                 "; run a newer outboxd");
        }
        throw MigrationError("the database has migration " + row.file_name +
                             " applied, which this outboxd does not know; run the outboxd that applied it");
    }
}

// Applying a file below the highest applied version would run it against a schema it was
// never written for, so a gap is refused rather than filled.
void verify_in_order(const std::vector<Migration>& migrations, const std::map<int, HistoryRow>& history) {
    if (history.empty()) return;
    const int highest = history.rbegin()->first;
    for (const auto& migration : migrations) {
        if (migration.version < highest && !history.contains(migration.version)) {
            throw MigrationError("migration " + migration.file_name + " is not applied but version " +
                                 std::to_string(highest) +
                                 " already is; give the new file a version above every applied one");
        }
    }
}

std::vector<LiveHost> live_hosts(pqxx::transaction_base& tx) {
    std::vector<LiveHost> hosts;
    if (!tx.exec1(kFleetExists)[0].as<bool>()) return hosts;
    for (const auto& row : tx.exec(kLiveHosts)) {
        hosts.push_back({row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<int>()});
    }
    return hosts;
}

std::string describe_hosts(const std::vector<LiveHost>& hosts) {
    constexpr std::size_t kNamed = 3;
    std::string text;
    for (std::size_t i = 0; i < hosts.size() && i < kNamed; ++i) {
        text += (i == 0 ? "" : ", ") + hosts[i].host_id + " (release " + hosts[i].release + ", schema " +
                (hosts[i].schema_needed > 0 ? std::to_string(hosts[i].schema_needed) : std::string("unrecorded")) +
                ")";
    }
    if (hosts.size() > kNamed) text += " and " + std::to_string(hosts.size() - kNamed) + " more";
    return text;
}

// A pending file breaks live hosts that need a schema below its threshold: an offline file
// every host built before it, a file raising compatible-with-hosts-from the hosts below that.
void refuse_breaking(const std::vector<Migration>& migrations, const std::map<int, HistoryRow>& history,
                     const std::vector<LiveHost>& hosts) {
    for (const auto& migration : migrations) {
        if (history.contains(migration.version)) continue;
        const int threshold = !migration.header.online ? migration.version : migration.header.hosts_from;
        std::vector<LiveHost> behind;
        for (const auto& host : hosts) {
            if (host.schema_needed < threshold) behind.push_back(host);
        }
        if (behind.empty()) continue;
        const std::string what =
            !migration.header.online
                ? "is not online (" + migration.header.offline_reason + ")"
                : "leaves only hosts that need schema " + std::to_string(threshold) + " or newer able to run";
        throw MigrationRefused("migration " + migration.file_name + " " + what + " and " +
                               std::to_string(behind.size()) + " live host(s) of an older release are registered: " +
                               describe_hosts(behind) +
                               "; stop or upgrade them first, or run `outboxd migrate --offline` to apply it anyway");
    }
}

// Session-level lock: it survives the per-file transactions and is released on every path.
class AdvisoryLock {
public:
    // Polled rather than waited for inside one statement: a waiting statement is an open
    // transaction, which a CREATE INDEX CONCURRENTLY of the lock holder waits for in turn.
    AdvisoryLock(pqxx::connection& conn, std::optional<std::chrono::milliseconds> wait) : conn_(conn) {
        const auto deadline = std::chrono::steady_clock::now() + wait.value_or(std::chrono::milliseconds::zero());
        while (true) {
            {
                pqxx::nontransaction tx{conn_};
                if (tx.exec_params1("SELECT pg_try_advisory_lock($1)", kMigrationLockKey)[0].as<bool>()) return;
                if (wait && std::chrono::steady_clock::now() >= deadline) {
                    // A bigint advisory key is stored as (classid, objid) = (high, low) 32 bits.
                    const auto holder = tx.exec_params(
                        "SELECT pid FROM pg_catalog.pg_locks WHERE locktype = 'advisory' AND granted"
                        " AND classid::bigint = ($1::bigint >> 32) AND objid::bigint = ($1::bigint & 4294967295)"
                        " AND objsubid = 1 LIMIT 1",
                        kMigrationLockKey);
                    const std::string who = holder.empty() ? "another session" : "backend pid " + holder[0][0].as<std::string>();
                    throw MigrationError("another migration (" + who + ") has held the migration lock for " +
                                           std::to_string(wait->count() / 1000) +
                                           "s (database.startup_timeout): wait for it to finish, or end that session");
                }
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
    }
    ~AdvisoryLock() {
        try {
            pqxx::nontransaction tx{conn_};
            tx.exec_params("SELECT pg_advisory_unlock($1)", kMigrationLockKey);
        } catch (...) {
            // A broken connection has ended the session, and the lock with it.
        }
    }
    AdvisoryLock(const AdvisoryLock&) = delete;
    AdvisoryLock& operator=(const AdvisoryLock&) = delete;
    AdvisoryLock(AdvisoryLock&&) = delete;
    AdvisoryLock& operator=(AdvisoryLock&&) = delete;

private:
    pqxx::connection& conn_;
};

// Runs a `-- outboxd: no-transaction` file statement by statement in autocommit mode.
void run_outside_transaction(pqxx::connection& conn, const std::string& sql, const std::string& path) {
    pqxx::nontransaction tx{conn};
    const std::string previous_path = tx.exec1("SELECT current_setting('search_path')")[0].as<std::string>();
    const std::string schema = tx.exec1("SELECT current_schema()")[0].as<std::string>();
    tx.exec0("SET search_path = " + path);
    try {
        for (const std::string& statement : split_statements(sql)) {
            if (const auto index = concurrent_index_name(statement)) {
                // A failed CREATE INDEX CONCURRENTLY leaves an INVALID index that IF NOT
                // EXISTS would then keep forever; drop it (without blocking writes) first.
                const bool invalid_leftover =
                    !tx.exec_params(
                           "SELECT 1 FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid "
                           "WHERE c.relname = $1 AND c.relnamespace = $2::regnamespace AND NOT i.indisvalid",
                           *index, tx.quote_name(schema))
                         .empty();
                if (invalid_leftover) {
                    tx.exec0("DROP INDEX CONCURRENTLY IF EXISTS " + tx.quote_name(schema) + "." + tx.quote_name(*index));
                }
            }
            tx.exec0(statement);
        }
    } catch (...) {
        try {
            tx.exec_params("SELECT set_config('search_path', $1, false)", previous_path);
        } catch (...) {
            // The connection is gone; so is its session setting.
        }
        throw;
    }
    tx.exec_params("SELECT set_config('search_path', $1, false)", previous_path);
}

bool role_exists(pqxx::transaction_base& tx, const std::string& role) {
    return !tx.exec_params("SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1", role).empty();
}

void check_role(pqxx::transaction_base& tx, const std::string& role, const std::string& option) {
    if (role.empty()) return;
    if (!role_exists(tx, role)) {
        throw RoleError("role '" + role + "' (" + option +
                        ") does not exist; create it first (outboxd migrate grants privileges, it never creates roles)");
    }
    if (tx.exec_params1("SELECT $1 = current_user", role)[0].as<bool>()) {
        throw RoleError("role '" + role + "' (" + option +
                        ") is the role running migrate, which owns the schema; name a separate role");
    }
    if (const auto excess = excess_rights(tx, role, true)) {
        throw RoleError(excess->describe() + " (" + option +
                        "), so it could change the schema and rewrite the audit; name a role that is neither a "
                        "superuser nor a member of the owner");
    }
}

void check_roles_exist(pqxx::transaction_base& tx, const RoleNames& roles) {
    check_role(tx, roles.runtime, "--runtime-role");
    check_role(tx, roles.publisher, "--publisher-role");
    if (!roles.runtime.empty() && roles.runtime == roles.publisher) {
        throw RoleError("--runtime-role and --publisher-role name the same role '" + roles.runtime +
                        "'; the publisher role must be a separate role that can only call outbox_publish");
    }
}

// What the runtime role may do per table, beyond which it has nothing. An outbox table not
// listed here (outbox_*, added by a later migration) gets SELECT, INSERT, UPDATE, DELETE:
// never TRUNCATE, REFERENCES, TRIGGER or ownership, so no DDL and no disabling of triggers.
// Tables of the application in the same schema are left alone.
struct TableGrant {
    const char* table;
    const char* privileges;
};
constexpr TableGrant kRuntimeTables[] = {
    {"event_publication", "SELECT, UPDATE, DELETE"},  // claims, outcomes, retry, retention
    {"event_consumption", "SELECT, INSERT, DELETE"},  // fence; retention's delete trigger
    {"outbox_manual_retry", "SELECT, INSERT"},        // append-only history
    {"audit_event", "SELECT, INSERT"},                // append-only audit
    {"outbox_handler_throttle", "SELECT, INSERT, UPDATE"},
    {"outbox_handler_slot", "SELECT, INSERT, UPDATE"},
    {"outbox_host", "SELECT, INSERT, UPDATE, DELETE"},
    {"outbox_schema_history", "SELECT"},  // start-up schema check
    {"outbox_role", "SELECT"},
    {"outbox_bulk_retry", "SELECT, INSERT"},               // append-only bulk re-drives
    {"outbox_handler_pause", "SELECT, INSERT, UPDATE, DELETE"},  // pause, resume, circuit-breaker probes
    {"outbox_event_type", "SELECT"},  // applied by `outboxd event-types apply` as the migrating role
    {"outbox_setting", "SELECT"},     // written by migrate and event-types apply
    {"outbox_discard", "SELECT, INSERT"},  // append-only discards
    {"outbox_aggregate", "SELECT"},        // positions are taken inside outbox_publish, as the owner
    {"outbox_operation", "SELECT, INSERT, UPDATE"},  // operator jobs: progress and state, never deleted
    {"outbox_attempt", "SELECT, INSERT"},            // append-only; partitions leave by outbox_attempt_maintain()
    {"outbox_attempt_partition", "SELECT"},          // written by outbox_attempt_maintain() as the owner
};
constexpr const char* kDefaultRuntimePrivileges = "SELECT, INSERT, UPDATE, DELETE";

// The outbox's tables in the schema, qualified and quoted. Partitions are left out: rows
// reach them through their parent, whose grants are the ones checked.
std::vector<std::pair<std::string, std::string>> outbox_tables(pqxx::transaction_base& tx, const std::string& schema) {
    std::vector<std::pair<std::string, std::string>> tables;
    for (const auto& row : tx.exec_params(
             "SELECT c.relname FROM pg_catalog.pg_class c WHERE c.relnamespace = $1::regnamespace "
             "AND c.relkind IN ('r', 'p') AND NOT c.relispartition AND (c.relname LIKE 'outbox\\_%' "
             "OR c.relname IN ('event_publication', 'event_consumption', 'audit_event')) ORDER BY 1",
             schema)) {
        const std::string name = row[0].as<std::string>();
        tables.emplace_back(name, schema + "." + tx.quote_name(name));
    }
    return tables;
}

void grant_runtime(pqxx::transaction_base& tx, const std::string& schema, const std::string& role) {
    const std::string r = tx.quote_name(role);
    tx.exec0("GRANT USAGE ON SCHEMA " + schema + " TO " + r);
    for (const auto& [name, table] : outbox_tables(tx, schema)) {
        const char* privileges = kDefaultRuntimePrivileges;
        for (const auto& grant : kRuntimeTables) {
            if (name == grant.table) privileges = grant.privileges;
        }
        tx.exec0("REVOKE ALL ON " + table + " FROM " + r);
        tx.exec0("GRANT " + std::string(privileges) + " ON " + table + " TO " + r);
    }
    for (const auto& row : tx.exec_params(
             "SELECT c.oid::regclass::text FROM pg_catalog.pg_class c WHERE c.relnamespace = $1::regnamespace "
             "AND c.relkind = 'S' AND c.relname LIKE 'outbox\\_%'",
             schema)) {
        tx.exec0("GRANT USAGE, SELECT ON SEQUENCE " + row[0].as<std::string>() + " TO " + r);
    }
    for (const auto& row : tx.exec_params(
             "SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc p "
             "WHERE p.pronamespace = $1::regnamespace AND p.proname LIKE 'outbox\\_%'",
             schema)) {
        tx.exec0("GRANT EXECUTE ON FUNCTION " + row[0].as<std::string>() + " TO " + r);
    }
}

void grant_publisher(pqxx::transaction_base& tx, const std::string& schema, const std::string& role) {
    const std::string r = tx.quote_name(role);
    tx.exec0("GRANT USAGE ON SCHEMA " + schema + " TO " + r);
    for (const auto& [name, table] : outbox_tables(tx, schema)) tx.exec0("REVOKE ALL ON " + table + " FROM " + r);
    for (const auto& row : tx.exec_params(
             "SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc p "
             "WHERE p.proname IN ('outbox_publish', 'outbox_publish_many') AND p.pronamespace = $1::regnamespace",
             schema)) {
        tx.exec0("GRANT EXECUTE ON FUNCTION " + row[0].as<std::string>() + " TO " + r);
    }
}

// Grants the stored roles (after storing the ones given now). Runs after every migrate, so
// tables and functions added by later migrations are covered once migrate has run.
void grant_roles(pqxx::connection& conn, const RoleNames& roles, const std::string& path) {
    pqxx::work tx{conn};
    tx.exec0("SET LOCAL search_path = " + path);
    const bool stored = tx.exec1("SELECT to_regclass('outbox_role') IS NOT NULL")[0].as<bool>();
    if (!stored) {
        if (!roles.runtime.empty() || !roles.publisher.empty()) {
            throw MigrationError("this schema has no outbox_role table; role grants need every migration applied");
        }
        return;
    }
    const auto store = [&](const char* kind, const std::string& role) {
        if (role.empty()) return;
        tx.exec_params0(
            "INSERT INTO outbox_role (kind, role_name) VALUES ($1, $2) "
            "ON CONFLICT (kind) DO UPDATE SET role_name = EXCLUDED.role_name",
            kind, role);
    };
    store("runtime", roles.runtime);
    store("publisher", roles.publisher);
    const std::string schema = tx.quote_name(tx.exec1("SELECT current_schema()")[0].as<std::string>());
    // Publisher first: if one role were stored for both, the runtime grants would win.
    for (const char* kind : {"publisher", "runtime"}) {
        const auto row = tx.exec_params("SELECT role_name FROM outbox_role WHERE kind = $1", kind);
        if (row.empty()) continue;
        const std::string role = row[0][0].as<std::string>();
        check_role(tx, role, std::string("stored ") + kind + " role");
        if (std::string_view(kind) == "runtime") {
            grant_runtime(tx, schema, role);
        } else {
            grant_publisher(tx, schema, role);
        }
    }
    tx.commit();
}

}  // namespace

Migrator::Migrator(std::vector<EmbeddedMigration> migrations) : migrations_(std::move(migrations)) {
    validated(migrations_);
}

MigrationHeader parse_migration_header(std::string_view file_name, std::string_view sql) {
    MigrationHeader header;
    const auto malformed = [&](std::string_view line, const char* expected) {
        return MigrationError("migration " + std::string(file_name) + " has a malformed header line '" +
                              std::string(line) + "'; expected " + expected);
    };
    std::size_t position = 0;
    while (position < sql.size()) {
        const auto end = std::min(sql.find('\n', position), sql.size());
        const std::string_view line = trim(sql.substr(position, end - position));
        position = end + 1;
        if (line.empty()) continue;
        if (!line.starts_with("--")) break;  // the header is the leading comment block
        const std::string_view text = trim(line.substr(2));
        constexpr std::string_view kOnline = "online:";
        constexpr std::string_view kHostsFrom = "compatible-with-hosts-from:";
        if (text.starts_with(kOnline)) {
            const std::string_view value = trim(text.substr(kOnline.size()));
            header.has_online = true;
            if (value == "yes") {
                header.online = true;
            } else if (value.starts_with("no") &&
                       (value.size() == 2 || std::string_view(" \t:,-\xe2").find(value[2]) != std::string_view::npos)) {
                // "no — why", "no: why", "no, why", "no - why": the reason is what follows.
                std::string_view reason = value.substr(2);
                while (!reason.empty() && std::string_view(" \t:,-").find(reason.front()) != std::string_view::npos) {
                    reason.remove_prefix(1);
                }
                if (reason.starts_with("\u2014")) reason.remove_prefix(std::string_view("\u2014").size());
                reason = trim(reason);
                if (reason.empty()) throw malformed(line, "'-- online: no — <why it cannot run online>'");
                header.online = false;
                header.offline_reason = std::string(reason);
            } else {
                throw malformed(line, "'-- online: yes' or '-- online: no — <why>'");
            }
        } else if (text.starts_with(kHostsFrom)) {
            const std::string_view digits = trim(text.substr(kHostsFrom.size()));
            int value = 0;
            const auto [ptr, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
            if (error != std::errc{} || ptr != digits.data() + digits.size() || value <= 0) {
                throw malformed(line, "'-- compatible-with-hosts-from: <schema version>'");
            }
            header.hosts_from = value;
        }
    }
    return header;
}

std::vector<AppliedMigration> Migrator::migrate(pqxx::connection& conn, const RoleNames& roles,
                                              MigrateOptions options) const {
    const std::vector<Migration> migrations = validated(migrations_);
    const AdvisoryLock lock{conn, options.lock_wait};

    std::map<int, HistoryRow> history;
    std::vector<std::string> sums;
    std::vector<LiveHost> hosts;
    std::string path;
    {
        pqxx::work tx{conn};
        const auto schema = tx.exec1("SELECT quote_ident(current_schema())")[0];
        if (schema.is_null()) {
            throw MigrationError("no schema of the connection's search_path exists; create the schema outboxd "
                                 "migrates into (or fix search_path) and run migrate again");
        }
        // Not naming pg_catalog keeps it searched first (PostgreSQL searches it before the
        // path unless it is named) while unqualified CREATEs still go to the target schema;
        // naming pg_temp last stops temporary tables from shadowing the outbox's tables.
        path = schema.as<std::string>() + ", pg_temp";
        check_roles_exist(tx, roles);
        tx.exec0(kCreateHistory);
        history = read_history(tx);
        sums = checksums(tx, migrations);
        hosts = live_hosts(tx);
        tx.commit();
    }
    verify_known(migrations, history);
    verify_applied(migrations, sums, history);
    verify_in_order(migrations, history);
    if (!options.allow_offline) refuse_breaking(migrations, history, hosts);

    std::vector<AppliedMigration> applied;
    for (std::size_t i = 0; i < migrations.size(); ++i) {
        const Migration& migration = migrations[i];
        if (history.contains(migration.version)) continue;
        const auto started = std::chrono::steady_clock::now();
        const auto elapsed_ms = [&] {
            return static_cast<long long>(
                std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started)
                    .count());
        };
        try {
            if (!migration.transactional()) run_outside_transaction(conn, migration.sql, path);
            pqxx::work tx{conn};
            tx.exec0("SET LOCAL search_path = " + path);
            if (migration.transactional()) tx.exec(migration.sql);
            const long long duration_ms = elapsed_ms();
            if (tx.exec1(kHasHostsFrom)[0].as<bool>()) {
                tx.exec_params0(kInsertHistoryWithHostsFrom, migration.version, migration.file_name, sums[i],
                                duration_ms, migration.header.hosts_from);
            } else {
                tx.exec_params0(kInsertHistory, migration.version, migration.file_name, sums[i], duration_ms);
            }
            tx.commit();
            applied.push_back({migration.version, migration.file_name, duration_ms});
        } catch (const pqxx::sql_error&) {
            throw failed_migration(migration.file_name, migration.transactional());
        } catch (const pqxx::transaction_rollback&) {
            // Not an sql_error in libpqxx 6.4 (serialization failure, deadlock).
            throw failed_migration(migration.file_name, migration.transactional());
        }
    }
    try {
        grant_roles(conn, roles, path);
    } catch (const pqxx::sql_error&) {
        throw MigrationError("granting the runtime and publisher roles their privileges failed: " +
                             classify_db_error(std::current_exception()).describe());
    }
    return applied;
}

int Migrator::latest_version() const {
    const std::vector<Migration> migrations = validated(migrations_);
    return migrations.empty() ? 0 : migrations.back().version;
}

SchemaStatus Migrator::status(pqxx::connection& conn) const {
    const std::vector<Migration> migrations = validated(migrations_);
    pqxx::read_transaction tx{conn};
    std::map<int, HistoryRow> history;
    SchemaStatus status;
    if (tx.exec1(kHistoryExists)[0].as<bool>()) {
        history = read_history(tx);
        status.hosts_from = tx.exec1(kRequiredHostSchema)[0].as<int>();
    }
    verify_applied(migrations, checksums(tx, migrations), history);
    tx.commit();

    status.applied_version = history.empty() ? 0 : history.rbegin()->first;
    status.latest_version = migrations.empty() ? 0 : migrations.back().version;
    for (const auto& migration : migrations) {
        if (!history.contains(migration.version)) status.pending.push_back(migration.file_name);
    }
    return status;
}

}  // namespace outbox::db
