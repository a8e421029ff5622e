#pragma once
// Login roles for one test (runtime, publisher and an unrelated one), created on the test
// server and dropped on destruction. Declare before the test's database: a role is dropped
// only once the database holding its privileges is gone.

#include <unistd.h>

#include <atomic>
#include <string>

#include <pqxx/pqxx>

#include "support/pg_fixture.hpp"

namespace outbox::test {

class TestRoles {
public:
    TestRoles() {
        static std::atomic<int> counter{0};
        const std::string suffix = std::to_string(::getpid()) + "_" + std::to_string(++counter);
        runtime = "outbox_rt_" + suffix;
        publisher = "outbox_pub_" + suffix;
        other = "outbox_other_" + suffix;
        for (const auto* role : {&runtime, &publisher, &other}) on_server("CREATE ROLE " + *role + " LOGIN");
    }
    ~TestRoles() {
        for (const auto* role : {&runtime, &publisher, &other}) {
            try {
                on_server("DROP ROLE IF EXISTS " + *role);
            } catch (...) {
                // A leftover role in the throwaway test cluster must not crash the run.
            }
        }
    }
    TestRoles(const TestRoles&) = delete;
    TestRoles& operator=(const TestRoles&) = delete;

    std::string runtime;
    std::string publisher;
    std::string other;

private:
    static void on_server(const std::string& sql) {
        pqxx::connection conn{server_url()};
        pqxx::nontransaction tx{conn};
        tx.exec0(sql);
    }
};

}  // namespace outbox::test
