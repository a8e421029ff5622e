// The handler connection pool against a real PostgreSQL: its bound and its per-connection
// prepared-statement cache.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <optional>

#include <pqxx/pqxx>

#include "db/connect.hpp"
#include "db/connection_pool.hpp"
#include "support/pg_fixture.hpp"

namespace outbox::test {
namespace {

using namespace std::chrono_literals;

TEST(ConnectionPool, AHandleMovedIntoPlaceKeepsItsSlotUntilItIsDropped) {
    TestDatabase db;
    db::ConnectionPool pool(db.url(), 1);
    std::optional<db::ConnectionPool::Handle> held;
    held.emplace(pool.acquire());  // moves the handle out of a temporary
    auto second = std::async(std::launch::async, [&] { auto conn = pool.acquire(); });
    EXPECT_EQ(second.wait_for(300ms), std::future_status::timeout) << "a pool of one handed out a second connection";
    held.reset();
    EXPECT_EQ(second.wait_for(10s), std::future_status::ready);
}

// Review F1: a call the host gives up on must not leave its backend waiting on a lock. The
// guard sends a cancel request before it shuts the socket; without it the server keeps the
// backend in the lock wait until it next writes to the client, which a lock wait never does.
TEST(CallGuard, AGuardThatGivesUpCancelsTheStatementSoNoBackendKeepsWaitingOnItsLock) {
    TestDatabase db;
    pqxx::connection holder(db.url());
    pqxx::nontransaction(holder).exec("SELECT pg_advisory_lock(4242)");
    auto waiter = db::open_connection(db.url());
    const int waiter_pid = waiter->backendpid();
    const auto started = std::chrono::steady_clock::now();
    {
        db::CallGuard guard(*waiter, started + 500ms);
        try {
            pqxx::nontransaction(*waiter).exec("SELECT pg_advisory_lock(4242)");
            ADD_FAILURE() << "the lock was granted while another session holds it";
        } catch (const pqxx::sql_error& e) {
            EXPECT_EQ(e.sqlstate(), "57014") << "the cancel request ended the statement";
        } catch (const pqxx::broken_connection&) {
            ADD_FAILURE() << "the socket was shut down: the cancel request did not end the statement";
        }
        EXPECT_FALSE(guard.fired());
    }
    EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
    pqxx::connection observer(db.url());
    const auto waiting = [&] {
        return pqxx::nontransaction(observer)
            .exec1("SELECT count(*) FROM pg_stat_activity WHERE pid = " + std::to_string(waiter_pid) +
                   " AND wait_event_type = 'Lock'")[0]
            .as<int>();
    };
    EXPECT_EQ(waiting(), 0) << "the backend still waits on the advisory lock";
    // The connection stays usable: the cancel ended the statement, not the session.
    EXPECT_EQ(pqxx::nontransaction(*waiter).exec1("SELECT 1")[0].as<int>(), 1);
}

TEST(ConnectionPool, StatementsArePreparedOncePerConnectionAndTheirNumberIsBounded) {
    TestDatabase db;
    db::ConnectionPool pool(db.url(), 1);
    auto conn = pool.acquire();
    const auto first = conn.prepared("SELECT $1::int + 1");
    ASSERT_TRUE(first);
    EXPECT_EQ(conn.prepared("SELECT $1::int + 1"), first);
    {
        pqxx::work tx(*conn);
        EXPECT_EQ(tx.exec_prepared1(*first, 41)[0].as<int>(), 42);
        EXPECT_EQ(tx.exec_prepared1(*first, 1)[0].as<int>(), 2);
        EXPECT_EQ(tx.exec1("SELECT count(*) FROM pg_prepared_statements WHERE name = '" + *first + "'")[0].as<int>(), 1);
        tx.commit();
    }
    for (std::size_t i = 1; i < db::ConnectionPool::kMaxPreparedStatements; ++i) {
        ASSERT_TRUE(conn.prepared("SELECT " + std::to_string(i)));
    }
    EXPECT_FALSE(conn.prepared("SELECT 'one too many'")) << "the cache must stop growing";
    EXPECT_EQ(conn.prepared("SELECT $1::int + 1"), first) << "known statements stay usable";

    conn.forget("SELECT $1::int + 1");
    EXPECT_TRUE(conn.prepared("SELECT 'room again'"));
    pqxx::work tx(*conn);
    EXPECT_EQ(tx.exec1("SELECT count(*) FROM pg_prepared_statements WHERE name = '" + *first + "'")[0].as<int>(), 0)
        << "a forgotten statement is deallocated on the server";
}

TEST(ConnectionPool, AReturnedConnectionKeepsItsPreparedStatements) {
    TestDatabase db;
    db::ConnectionPool pool(db.url(), 1);
    std::optional<std::string> name;
    {
        auto conn = pool.acquire();
        name = conn.prepared("SELECT 7");
    }
    auto again = pool.acquire();
    EXPECT_EQ(again.prepared("SELECT 7"), name);
}

}  // namespace
// The admin API bounds every statement through a session setting added to the URL: it must
// reach the server whatever else the URL says, and must not replace the URL's own choice.
TEST(Connect, ServerSettingsJoinTheUrlsOwnOptionsAndTheUrlWins) {
    TestDatabase db;
    const std::string base = db.url() + (db.url().find('?') == std::string::npos ? "?" : "&");
    const auto show = [](const std::string& conninfo, const std::string& name) {
        pqxx::connection conn{conninfo};
        pqxx::nontransaction tx{conn};
        return tx.exec1("SHOW " + name)[0].as<std::string>();
    };
    EXPECT_EQ(show(db::conninfo_with(base + "application_name=options_probe", {}, {"statement_timeout=4321"}),
                   "statement_timeout"),
              "4321ms")
        << "a URL that merely contains the word options still gets the setting";
    const std::string with_options = base + "options=-c%20work_mem%3D4242kB";
    EXPECT_EQ(show(db::conninfo_with(with_options, {}, {"statement_timeout=4321"}), "statement_timeout"), "4321ms");
    EXPECT_EQ(show(db::conninfo_with(with_options, {}, {"statement_timeout=4321"}), "work_mem"), "4242kB");
    EXPECT_EQ(show(db::conninfo_with(base + "options=-c%20statement_timeout%3D1234", {}, {"statement_timeout=4321"}),
                   "statement_timeout"),
              "1234ms")
        << "the URL's own statement_timeout wins";
}

}  // namespace outbox::test

namespace outbox::test {
namespace {

// A failover pair in libpq's multi-host syntax: every connection the host opens (through
// open_connection, and through conninfo_with as the admin API does) skips a server that is
// gone and lands on the one that accepts writes.
TEST(Connect, AMultiHostUrlReachesTheServerThatAnswersAndAsksForAWritableOne) {
    TestDatabase db;
    pqxx::connection probe{db.url()};
    const std::string port = probe.port();
    const std::string dbname = probe.dbname();
    // A port nothing listens on: libpq gets "connection refused" there and moves on.
    const std::string url =
        "postgresql://" + std::string(probe.username()) + "@127.0.0.1:1,127.0.0.1:" + port + "/" + dbname;
    const std::string conninfo = db::effective_conninfo(url, db::connection_settings());
    EXPECT_NE(conninfo.find("target_session_attrs='read-write'"), std::string::npos) << conninfo;
    EXPECT_NE(conninfo.find("host='127.0.0.1,127.0.0.1'"), std::string::npos) << conninfo;

    auto conn = db::open_connection(url);
    EXPECT_EQ(std::string(conn->port()), port);
    pqxx::nontransaction tx{*conn};
    EXPECT_EQ(tx.exec1("SHOW transaction_read_only")[0].as<std::string>(), "off");

    auto admin = db::open_connection(db::conninfo_with(url, {{"connect_timeout", "2"}}, {"statement_timeout=4321"}));
    pqxx::nontransaction admin_tx{*admin};
    EXPECT_EQ(admin_tx.exec1("SHOW statement_timeout")[0].as<std::string>(), "4321ms");

    EXPECT_NE(db::effective_conninfo(url + "?target_session_attrs=any", db::connection_settings())
                  .find("target_session_attrs='any'"),
              std::string::npos)
        << "the URL's own choice wins";
    EXPECT_EQ(db::effective_conninfo(db.url(), db::connection_settings()).find("target_session_attrs"), std::string::npos)
        << "one host: libpq's default stays";
}

}  // namespace
}  // namespace outbox::test
