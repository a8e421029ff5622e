#pragma once

#include <string>

#include <pqxx/pqxx>

namespace outbox::test {

/// Connection string of the PostgreSQL server the tests use, from OUTBOX_TEST_DATABASE_URL
/// (a URL whose user may CREATE DATABASE). Throws std::runtime_error when unset: tests that
/// need PostgreSQL fail without it, they never skip.
std::string server_url();

/// A fresh database for one test, cloned (CREATE DATABASE ... TEMPLATE) from a template
/// that is migrated once per test process with the embedded migrations; dropped (WITH
/// FORCE) on destruction.
class TestDatabase {
public:
    TestDatabase();
    ~TestDatabase();
    TestDatabase(const TestDatabase&) = delete;
    TestDatabase& operator=(const TestDatabase&) = delete;

    [[nodiscard]] const std::string& url() const noexcept { return url_; }
    [[nodiscard]] const std::string& name() const noexcept { return name_; }

    /// Runs `sql` in its own committed transaction and returns the result.
    pqxx::result exec(const std::string& sql) const;
    /// The first column of the first row as text (throws when there is no row).
    [[nodiscard]] std::string scalar(const std::string& sql) const;

private:
    std::string name_;
    std::string url_;
};

/// `base_url` with its database name replaced by `database` (URL or key=value form).
std::string with_database(const std::string& base_url, const std::string& database);

/// `base_url` connecting as `user` (no password: the test cluster trusts local users).
std::string with_user(const std::string& base_url, const std::string& user);

}  // namespace outbox::test
