// Least-privilege roles and the pinned search_path against a real PostgreSQL: what
// `outboxd migrate --runtime-role/--publisher-role` grants, what those roles cannot do,
// that every function pins its search_path, and that functions planted by another role in
// a schema on the path change nothing.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "db/embedded_migrations.hpp"
#include "db/migrator.hpp"
#include "lease/lease_store.hpp"
#include "support/pg_fixture.hpp"
#include "support/test_roles.hpp"

namespace {

using outbox::db::Migrator;
using outbox::db::RoleError;
using outbox::db::RoleNames;
using outbox::test::TestDatabase;
using outbox::test::TestRoles;
using ::testing::HasSubstr;

void migrate_with_roles(const TestDatabase& db, const RoleNames& roles,
                        std::vector<outbox::db::EmbeddedMigration> migrations = outbox::db::embedded_migrations()) {
    pqxx::connection conn{db.url()};
    Migrator(std::move(migrations)).migrate(conn, roles);
}

// Runs `sql` as `role` in a transaction that is rolled back; returns the SQLSTATE of the
// failure, or "" when the statement succeeded.
std::string sqlstate_as(const TestDatabase& db, const std::string& role, const std::string& sql) {
    pqxx::connection conn{outbox::test::with_user(db.url(), role)};
    pqxx::work tx{conn};
    try {
        tx.exec(sql);
        return "";
    } catch (const pqxx::insufficient_privilege&) {
        return "42501";  // libpqxx 6.4 does not fill sqlstate() for this class
    } catch (const pqxx::sql_error& e) {
        return e.sqlstate().empty() ? std::string("?") : e.sqlstate();
    }
}

constexpr const char* kDenied = "42501";
constexpr const char* kPublishSql = "SELECT outbox_publish('acme', 'ThingHappened', '{\"n\": 1}'::jsonb)";

std::string insert_audit_row(const TestDatabase& db) {
    db.exec("INSERT INTO audit_event (actor, action) VALUES ('test', 'RETRY')");
    return db.scalar("SELECT count(*) FROM audit_event");
}

TEST(DbRoles, MigrateRefusesARoleThatDoesNotExistAndAppliesNothing) {
    const TestRoles roles;
    const TestDatabase db;
    db.exec("DELETE FROM outbox_schema_history WHERE version = 9; DROP INDEX event_publication_company_list_idx");
    try {
        migrate_with_roles(db, {.runtime = "outbox_no_such_role", .publisher = roles.publisher});
        FAIL() << "migrate accepted a role that does not exist";
    } catch (const RoleError& e) {
        EXPECT_THAT(e.what(), HasSubstr("role 'outbox_no_such_role' (--runtime-role) does not exist"));
        EXPECT_THAT(e.what(), HasSubstr("never creates roles"));
    }
    EXPECT_EQ(db.scalar("SELECT count(*) FROM outbox_schema_history WHERE version = 9"), "0");
    EXPECT_EQ(db.scalar("SELECT count(*) FROM outbox_role"), "0");
    EXPECT_THROW(migrate_with_roles(db, {.runtime = roles.runtime, .publisher = roles.runtime}), RoleError);
    EXPECT_THROW(migrate_with_roles(db, {.runtime = "postgres", .publisher = ""}), RoleError);  // the owner itself
}

TEST(DbRoles, PublisherCanPublishButCannotTouchTables) {
    const TestRoles roles;
    const TestDatabase db;
    migrate_with_roles(db, {.runtime = roles.runtime, .publisher = roles.publisher});
    migrate_with_roles(db, {.runtime = roles.runtime, .publisher = roles.publisher});  // idempotent
    {
        pqxx::connection conn{outbox::test::with_user(db.url(), roles.publisher)};
        pqxx::work tx{conn};
        tx.exec(kPublishSql);
        tx.commit();
    }
    EXPECT_EQ(db.scalar("SELECT count(*) FROM event_publication"), "1");
    {
        // A temporary table cannot stand in for the outbox table inside the definer function.
        pqxx::connection conn{outbox::test::with_user(db.url(), roles.publisher)};
        pqxx::work tx{conn};
        tx.exec("CREATE TEMP TABLE event_publication (event_id uuid DEFAULT gen_random_uuid(), company_id text, "
                "event_type text, aggregate_key text, dedup_key text, payload jsonb)");
        tx.exec(kPublishSql);
        EXPECT_EQ(tx.exec1("SELECT count(*) FROM pg_temp.event_publication")[0].as<int>(), 0);
        tx.commit();
    }
    EXPECT_EQ(db.scalar("SELECT count(*) FROM event_publication"), "2");
    EXPECT_EQ(sqlstate_as(db, roles.publisher, "SELECT * FROM event_publication"), kDenied);
    EXPECT_EQ(sqlstate_as(db, roles.publisher,
                          "INSERT INTO event_publication (company_id, event_type, payload) VALUES ('a', 'X', '{}')"),
              kDenied);
    EXPECT_EQ(sqlstate_as(db, roles.publisher, "UPDATE event_publication SET status = 'COMPLETED'"), kDenied);
    EXPECT_EQ(sqlstate_as(db, roles.publisher, "DELETE FROM event_publication"), kDenied);
    EXPECT_EQ(sqlstate_as(db, roles.publisher, "SELECT * FROM audit_event"), kDenied);
    EXPECT_EQ(sqlstate_as(db, roles.publisher, "SELECT * FROM event_consumption"), kDenied);
    // The attempt history's definer function drops partitions: never the application's.
    EXPECT_EQ(sqlstate_as(db, roles.publisher,
                          "SELECT * FROM outbox_attempt_maintain(interval '1 minute', interval '0', interval '1 minute')"),
              kDenied);
    EXPECT_EQ(sqlstate_as(db, roles.publisher, "SELECT * FROM outbox_attempt"), kDenied);
    // A role that was granted nothing cannot publish: PUBLIC has no EXECUTE on outbox_publish.
    EXPECT_EQ(sqlstate_as(db, roles.other, kPublishSql), kDenied);
    // The batch publish is granted with it, and adds no privilege of its own.
    constexpr const char* kPublishManySql =
        R"(SELECT * FROM outbox_publish_many('acme', '[{"event_type": "ThingHappened", "payload": {}, )"
        R"("aggregate_key": "k-1"}]'))";
    EXPECT_EQ(sqlstate_as(db, roles.other, kPublishManySql), kDenied);
    {
        pqxx::connection conn{outbox::test::with_user(db.url(), roles.publisher)};
        pqxx::work tx{conn};
        tx.exec(kPublishManySql);
        tx.commit();
    }
    EXPECT_EQ(db.scalar("SELECT count(*) FROM event_publication WHERE aggregate_key = 'k-1'"), "1");
    // The screening runs inside the SECURITY DEFINER function for the publisher too.
    EXPECT_EQ(sqlstate_as(db, roles.publisher,
                          "SELECT outbox_publish('acme', 'ThingHappened', '{}'::jsonb, 'ann@example.com')"),
              "22023");
}

// The publisher role may name any company_id: a repeated dedup_key must not tell it the id
// of another company's event (a read oracle), nor insert anything.
TEST(DbRoles, ADuplicateDedupKeyAnswersThePublisherRoleWithNullNotAnotherCompanysEventId) {
    const TestRoles roles;
    const TestDatabase db;
    migrate_with_roles(db, {.runtime = roles.runtime, .publisher = roles.publisher});
    constexpr const char* kDedupSql =
        "SELECT outbox_publish('globex', 'ThingHappened', '{\"n\": 1}'::jsonb, NULL, 'order-7')::text";
    const std::string theirs = db.scalar(kDedupSql);
    ASSERT_EQ(theirs.size(), 36u) << theirs;
    const auto publish_as = [&](const std::string& role) {
        pqxx::connection conn{outbox::test::with_user(db.url(), role)};
        pqxx::work tx{conn};
        const pqxx::field id = tx.exec1(kDedupSql)[0];
        tx.commit();
        return id.is_null() ? std::string("NULL") : id.as<std::string>();
    };
    EXPECT_EQ(publish_as(roles.publisher), "NULL");
    EXPECT_EQ(db.scalar("SELECT count(*) FROM event_publication"), "1") << "a duplicate inserts nothing";
    // A role that may read events anyway (a host) still learns the existing id.
    EXPECT_EQ(publish_as(roles.runtime), theirs);
    EXPECT_EQ(db.scalar(kDedupSql), theirs);
}

// docs/security.md's "The exact grants" is the policy: every outbox table the migrations
// create must be listed there, with exactly the privileges the runtime role ends up with.
TEST(DbRoles, TheRuntimeRolesGrantsAreExactlyTheDocumentedOnesForEveryTable) {
    const TestRoles roles;
    const TestDatabase db;
    migrate_with_roles(db, {.runtime = roles.runtime, .publisher = roles.publisher});
    std::ifstream docs(std::string(OUTBOX_SOURCE_DIR) + "/docs/security.md");
    ASSERT_TRUE(docs);
    std::map<std::string, std::string> documented;
    const std::regex grant(R"(^GRANT ([A-Z, ]+?) +ON outbox\.([a-z_]+) +TO outbox_runtime;)");
    for (std::string line; std::getline(docs, line);) {
        std::smatch m;
        if (std::regex_search(line, m, grant)) {
            std::string privileges = m[1].str();
            std::vector<std::string> parts;
            for (std::size_t start = 0; start <= privileges.size();) {
                const auto comma = privileges.find(", ", start);
                parts.push_back(privileges.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
                if (comma == std::string::npos) break;
                start = comma + 2;
            }
            std::sort(parts.begin(), parts.end());
            std::string sorted;
            for (const auto& p : parts) sorted += (sorted.empty() ? "" : ", ") + p;
            documented[m[2].str()] = sorted;
        }
    }
    ASSERT_GE(documented.size(), 10u);
    pqxx::connection conn{db.url()};
    pqxx::read_transaction tx{conn};
    std::map<std::string, std::string> granted;
    for (const auto& row : tx.exec_params(
             "SELECT c.relname, coalesce((SELECT string_agg(a.privilege_type, ', ' ORDER BY a.privilege_type) "
             "FROM aclexplode(c.relacl) a WHERE a.grantee = $1::regrole), '') "
             "FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p') "
             "AND NOT c.relispartition "
             "AND (c.relname LIKE 'outbox\\_%' OR c.relname IN ('event_publication', 'event_consumption', 'audit_event')) "
             "ORDER BY 1",
             roles.runtime)) {
        granted[row[0].as<std::string>()] = row[1].as<std::string>();
    }
    EXPECT_EQ(granted, documented) << "docs/security.md, \"The exact grants\", must list every outbox table";
    // Partitions (outbox_attempt_default and the time ranges) are reached through their
    // parent only: the runtime role holds nothing on them.
    EXPECT_EQ(tx.exec_params1("SELECT coalesce(string_agg(c.relname, ','), '') FROM pg_class c WHERE c.relispartition "
                              "AND c.relnamespace = current_schema()::regnamespace AND EXISTS (SELECT 1 FROM "
                              "aclexplode(c.relacl) a WHERE a.grantee = $1::regrole)",
                              roles.runtime)[0]
                  .as<std::string>(),
              "");
    EXPECT_EQ(tx.exec1("SELECT count(*) FROM pg_class WHERE relname = 'outbox_attempt_default' AND relispartition")[0]
                  .as<long long>(),
              1);
}

TEST(DbRoles, RuntimeRoleCannotChangeTheSchemaOrTheHistory) {
    const TestRoles roles;
    const TestDatabase db;
    migrate_with_roles(db, {.runtime = roles.runtime, .publisher = roles.publisher});
    insert_audit_row(db);
    const auto& rt = roles.runtime;
    for (const char* ddl : {
             "ALTER TABLE audit_event DISABLE TRIGGER audit_event_immutable",
             "ALTER TABLE outbox_manual_retry DISABLE TRIGGER ALL",
             "ALTER TABLE event_publication ADD COLUMN x integer",
             "ALTER TABLE audit_event DROP COLUMN detail",
             "DROP TABLE event_consumption",
             "DROP TRIGGER audit_event_immutable ON audit_event",
             "TRUNCATE event_publication",
             "TRUNCATE audit_event",
             "CREATE TABLE outbox_extra (id integer)",
             "CREATE INDEX ON event_publication (payload)",
             "CREATE OR REPLACE FUNCTION outbox_reject_modification() RETURNS trigger LANGUAGE plpgsql AS "
             "$$ BEGIN RETURN NULL; END $$",
             "UPDATE audit_event SET actor = 'someone else'",
             "DELETE FROM audit_event",
             "UPDATE outbox_manual_retry SET reason = 'rewritten history'",
             "DELETE FROM outbox_manual_retry",
             "INSERT INTO event_publication (company_id, event_type, payload) VALUES ('a', 'X', '{}')",
             "DELETE FROM outbox_schema_history",
         }) {
        EXPECT_EQ(sqlstate_as(db, rt, ddl), kDenied) << ddl;
    }
    // What it needs works.
    for (const char* allowed : {
             "SELECT count(*) FROM event_publication",
             "UPDATE event_publication SET version = version",
             "DELETE FROM event_publication WHERE false",
             "INSERT INTO audit_event (actor, action) VALUES ('runtime', 'RETRY')",
             "SELECT count(*) FROM audit_event",
             "SELECT count(*) FROM outbox_manual_retry",
             "SELECT * FROM outbox_take_handler_slot('h', 2, 'host', interval '5 seconds')",
             "SELECT outbox_reserve_call_slot('h', interval '1 second', interval '5 seconds')",
             kPublishSql,
         }) {
        EXPECT_EQ(sqlstate_as(db, rt, allowed), "") << allowed;
    }
}

TEST(DbRoles, LaterMigrationsTablesAreGrantedToTheStoredRoles) {
    const TestRoles roles;
    const TestDatabase db;
    migrate_with_roles(db, {.runtime = roles.runtime, .publisher = roles.publisher});
    auto later = outbox::db::embedded_migrations();
    later.push_back({"V1000__later_table.sql", "CREATE TABLE outbox_later (id integer PRIMARY KEY);"});
    migrate_with_roles(db, {}, later);  // no flags: the stored roles are granted again
    EXPECT_EQ(sqlstate_as(db, roles.runtime, "INSERT INTO outbox_later VALUES (1)"), "");
    EXPECT_EQ(sqlstate_as(db, roles.runtime, "TRUNCATE outbox_later"), kDenied);
    EXPECT_EQ(sqlstate_as(db, roles.publisher, "SELECT * FROM outbox_later"), kDenied);
    EXPECT_EQ(db.scalar("SELECT string_agg(kind || '=' || role_name, ',' ORDER BY kind) FROM outbox_role"),
              "publisher=" + roles.publisher + ",runtime=" + roles.runtime);
}

// Every function in the outbox schema, from any migration, runs with a pinned search_path:
// pg_catalog (searched first as it is not named), the outbox schema, pg_temp last. A new
// function without `SET search_path FROM CURRENT` fails here.
TEST(DbRoles, EveryFunctionPinsItsSearchPath) {
    const TestDatabase db;
    const auto functions = db.exec(
        "SELECT p.oid::regprocedure::text, coalesce(array_to_string(p.proconfig, ';'), '') FROM pg_proc p "
        "WHERE p.pronamespace = current_schema()::regnamespace "
        "AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e') ORDER BY 1");
    ASSERT_GE(functions.size(), 9U);
    for (const auto& row : functions) {
        EXPECT_THAT(row[1].as<std::string>(), HasSubstr("search_path=public, pg_temp"))
            << row[0].as<std::string>() << " does not pin its search_path";
    }
    EXPECT_EQ(db.scalar("SELECT prosecdef FROM pg_proc WHERE proname = 'outbox_publish'"), "t");
    EXPECT_EQ(db.scalar("SELECT has_function_privilege('public', 'outbox_publish(text, text, jsonb, text, text, timestamptz, text, text)', "
                        "'EXECUTE')"),
              "f");
}

// Another role that may create objects in a schema on the path plants look-alikes of the
// built-ins the functions and the host's statements call. Exact-type matches outrank
// pg_catalog's polymorphic versions even with pg_catalog first, so the calls are qualified.
TEST(DbRoles, FunctionsPlantedByAnotherRoleChangeNothing) {
    const TestRoles roles;
    const TestDatabase db;
    db.exec("GRANT CREATE ON SCHEMA public TO " + roles.other);
    {
        pqxx::connection conn{outbox::test::with_user(db.url(), roles.other)};
        pqxx::work tx{conn};
        tx.exec(R"SQL(
CREATE FUNCTION public.unnest(text[]) RETURNS SETOF text LANGUAGE sql AS $$ SELECT 'planted'::text $$;
CREATE FUNCTION public.unnest(uuid[]) RETURNS SETOF uuid LANGUAGE sql AS $$ SELECT gen_random_uuid() $$;
CREATE FUNCTION public.unnest(integer[]) RETURNS SETOF integer LANGUAGE sql AS $$ SELECT -1 $$;
CREATE FUNCTION public.length(text) RETURNS integer LANGUAGE sql AS $$ SELECT 0 $$;
CREATE FUNCTION public.generate_series(integer, integer) RETURNS SETOF integer LANGUAGE sql AS $$ SELECT -5 $$;
CREATE FUNCTION public.set_bit(bytea, integer, integer) RETURNS bytea LANGUAGE sql
    AS $$ SELECT '\x00000000000000000000000000000000'::bytea $$;
CREATE FUNCTION public.planted_mul(double precision, integer) RETURNS double precision LANGUAGE sql
    AS $$ SELECT -7.0::double precision $$;
CREATE OPERATOR public.* (LEFTARG = double precision, RIGHTARG = integer, FUNCTION = public.planted_mul);
CREATE FUNCTION public.hashtext(text) RETURNS integer LANGUAGE sql AS $$ SELECT 42 $$;
CREATE FUNCTION public.jsonb_typeof(jsonb) RETURNS text LANGUAGE sql AS $$ SELECT 'object'::text $$;
)SQL");
        tx.commit();
    }
    pqxx::connection conn{db.url()};  // the default search_path: "$user", public
    ASSERT_EQ(pqxx::work(conn).exec1("SELECT string_agg(x, ',') FROM unnest(ARRAY['a', 'b']::text[]) AS x")[0]
                  .as<std::string>(),
              "planted")
        << "an unqualified call does reach the planted function";

    // Publish: checks and the uuid v7 default behave as before.
    const auto refused = [&](const std::string& sql) {
        pqxx::work tx{conn};
        try {
            tx.exec(sql);
        } catch (const pqxx::sql_error& e) {
            return e.sqlstate() == "22023";
        }
        return false;
    };
    EXPECT_TRUE(refused("SELECT outbox_publish('', 'ThingHappened', '{}'::jsonb)"));
    EXPECT_TRUE(refused("SELECT outbox_publish('acme', 'ThingHappened', '{\"a\": [1]}'::jsonb)"));
    EXPECT_FALSE(refused("SELECT outbox_publish('acme', 'ThingHappened', '{\"n\": 1}'::jsonb, 'user-1')"));
    std::string id;
    {
        pqxx::work tx{conn};
        id = tx.exec1("SELECT outbox_publish('acme', 'ThingHappened', '{\"n\": 1}'::jsonb, 'user-1')::text")[0]
                 .as<std::string>();
        tx.commit();
    }
    EXPECT_EQ(id.substr(14, 1), "7") << id;
    EXPECT_NE(id.substr(0, 8), "00000000") << id;

    // Claims, lease extension and the fence.
    outbox::lease::LeaseStore store{conn};
    const auto claimed = store.claim({"ThingHappened"}, 10, {"host-a", ""}, std::chrono::seconds{30});
    ASSERT_EQ(claimed.size(), 1U);
    EXPECT_EQ(claimed[0].event.id, id);
    const outbox::lease::LeaseRef lease{claimed[0].event.id, claimed[0].lease_token};
    EXPECT_EQ(store.extend({lease}, std::chrono::seconds{30}), std::vector<std::string>{lease.lease_token});
    {
        pqxx::work tx{conn};
        tx.exec(outbox::lease::fence_statement(conn, lease, {"h1", "h2"}, true));
        tx.commit();
    }
    EXPECT_EQ(db.scalar("SELECT status FROM event_publication WHERE event_id = '" + id + "'"), "COMPLETED");
    EXPECT_EQ(db.scalar("SELECT string_agg(handler_name, ',' ORDER BY handler_name) FROM event_consumption"),
              "h1,h2");

    // Fleet slots.
    {
        pqxx::work tx{conn};
        const auto taken = tx.exec("SELECT taken_slot FROM outbox_take_handler_slot('h', 3, 'host-a', '5 s')");
        ASSERT_EQ(taken.size(), 1U);
        EXPECT_GE(taken[0][0].as<int>(), 0);
        EXPECT_LT(taken[0][0].as<int>(), 3);
        const int slot = tx.exec1("SELECT outbox_try_acquire_call_slot(7, 4, '{}')")[0].as<int>();
        EXPECT_GE(slot, 0);
        EXPECT_LT(slot, 4);
        tx.exec("SELECT pg_advisory_unlock_all()");
        tx.commit();
    }
}

}  // namespace

namespace {

// A publisher of the previous release connects as a role with INSERT (and SELECT) on event_publication
// and relies on PUBLIC's EXECUTE; V8 revokes that, so it grants such roles EXECUTE and they
// keep publishing through the upgrade.
TEST(DbRoles, PublishersOfThePreviousReleaseKeepPublishingAfterTheUpgrade) {
    const TestRoles roles;
    const std::string name = "outbox_roles_upgrade_" + std::to_string(::getpid());
    const auto on_server = [](const std::string& sql) {
        pqxx::connection conn{outbox::test::server_url()};
        pqxx::nontransaction tx{conn};
        tx.exec0(sql);
    };
    on_server("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
    on_server("CREATE DATABASE " + name);
    const std::string url = outbox::test::with_database(outbox::test::server_url(), name);
    const auto publish_as = [&](const std::string& role) {
        pqxx::connection conn{outbox::test::with_user(url, role)};
        pqxx::work tx{conn};
        try {
            tx.exec(kPublishSql);
            tx.commit();
            return true;
        } catch (const pqxx::sql_error&) {
            return false;
        }
    };
    try {
        {
            pqxx::connection conn{url};
            std::vector<outbox::db::EmbeddedMigration> before_v8;
            for (const auto& m : outbox::db::embedded_migrations()) {
                if (m.file_name.starts_with("V") && std::stoi(std::string(m.file_name.substr(1))) < 8) before_v8.push_back(m);
            }
            Migrator(before_v8).migrate(conn);
            pqxx::work tx{conn};
            tx.exec("GRANT SELECT, INSERT ON event_publication TO " + roles.publisher);  // RETURNING needs SELECT
            tx.commit();
        }
        ASSERT_TRUE(publish_as(roles.publisher));
        {
            pqxx::connection conn{url};
            Migrator().migrate(conn);
        }
        EXPECT_TRUE(publish_as(roles.publisher));
        EXPECT_FALSE(publish_as(roles.other));
    } catch (...) {
        on_server("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
        throw;
    }
    on_server("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
}

}  // namespace
