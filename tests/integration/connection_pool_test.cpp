// The handler connection pool against a real PostgreSQL: its bound and its per-connection
// prepared-statement cache.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <optional>

#include <pqxx/pqxx>

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
}  // namespace outbox::test
