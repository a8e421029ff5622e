#include "support/pg_fixture.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string_view>

#include "db/migrator.hpp"

namespace outbox::test {
namespace {

std::string pid_suffix() { return std::to_string(static_cast<long>(::getpid())); }

std::string quote_ident(const std::string& name) {
    std::string quoted = "\"";
    for (const char c : name) {
        if (c == '"') quoted += '"';
        quoted += c;
    }
    return quoted + '"';
}

// CREATE/DROP DATABASE cannot run inside a transaction block.
void exec_on_server(const std::string& sql) {
    pqxx::connection conn{server_url()};
    pqxx::nontransaction tx{conn};
    tx.exec0(sql);
}

void drop_template_at_exit() noexcept;

// How each test's database is copied from the template. FILE_COPY copies the files and
// checkpoints before and after, which without fsync costs a third of the CPU of PostgreSQL
// 15's default (WAL_LOG writes every page of the copy to the WAL); with fsync on, its
// checkpoints make it several times slower, so it is chosen only then (scripts/pg.sh
// --non-durable, as the test stages start their cluster).
std::string copy_strategy() {
    static const std::string strategy = [] {
        pqxx::connection conn{server_url()};
        pqxx::nontransaction tx{conn};
        const bool file_copy = tx.exec1("SELECT current_setting('fsync') = 'off' AND "
                                        "current_setting('server_version_num')::int >= 150000")[0]
                                   .as<bool>();
        return std::string{file_copy ? " STRATEGY FILE_COPY" : ""};
    }();
    return strategy;
}

struct TemplateState {
    std::mutex mutex;
    std::optional<std::string> name;
    std::optional<std::string> failure;
};

TemplateState& template_state() {
    // Leaked on purpose: the atexit handler runs after function-local statics are destroyed.
    static auto* state = new TemplateState;
    return *state;
}

// Migrated once per process, lazily, so a test binary that never touches PostgreSQL needs none.
std::string template_database() {
    TemplateState& state = template_state();
    const std::lock_guard lock{state.mutex};
    if (state.name) return *state.name;
    if (state.failure) throw std::runtime_error(*state.failure);
    const std::string name = "outbox_tpl_" + pid_suffix();
    try {
        // A template left by a crashed process with the same pid is stale.
        exec_on_server("DROP DATABASE IF EXISTS " + quote_ident(name) + " WITH (FORCE)");
        exec_on_server("CREATE DATABASE " + quote_ident(name));
        {
            pqxx::connection conn{with_database(server_url(), name)};
            db::Migrator{}.migrate(conn);
        }  // CREATE DATABASE ... TEMPLATE refuses a source with open connections.
    } catch (const std::exception& e) {
        state.failure = "cannot prepare the migrated template database " + name + ": " + e.what();
        throw std::runtime_error(*state.failure);
    }
    state.name = name;
    std::atexit(drop_template_at_exit);
    return name;
}

void drop_template_at_exit() noexcept {
    try {
        const TemplateState& state = template_state();
        if (state.name) exec_on_server("DROP DATABASE IF EXISTS " + quote_ident(*state.name) + " WITH (FORCE)");
    } catch (...) {
        // The server may already be gone at exit; a throwaway cluster is removed with it.
    }
}

bool is_url(std::string_view conninfo) {
    return conninfo.starts_with("postgresql://") || conninfo.starts_with("postgres://");
}

std::string percent_encode(std::string_view text) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    std::string out;
    for (const char c : text) {
        const auto u = static_cast<unsigned char>(c);
        if ((u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || (u >= '0' && u <= '9') || c == '-' || c == '_' ||
            c == '.' || c == '~') {
            out += c;
        } else {
            out += '%';
            out += kHex[u >> 4];
            out += kHex[u & 0xF];
        }
    }
    return out;
}

// scheme://[user@]host[:port][/dbname][?param=value&...]; a dbname query parameter would
// override the path, so it is replaced too.
std::string url_with_database(const std::string& url, const std::string& database) {
    const auto authority_start = url.find("://") + 3;
    const auto authority_end = std::min(url.find_first_of("/?#", authority_start), url.size());
    const auto query_start = url.find('?', authority_end);
    std::string result = url.substr(0, authority_end) + "/" + percent_encode(database);
    if (query_start == std::string::npos) return result;

    std::string_view query = std::string_view(url).substr(query_start + 1);
    char separator = '?';
    while (!query.empty()) {
        const auto amp = query.find('&');
        std::string_view param = query.substr(0, amp);
        query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
        if (param.starts_with("dbname=")) continue;
        result += separator;
        result += param;
        separator = '&';
    }
    return result;
}

std::string quote_conninfo_value(const std::string& value) {
    std::string quoted = "'";
    for (const char c : value) {
        if (c == '\'' || c == '\\') quoted += '\\';
        quoted += c;
    }
    return quoted + "'";
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// key = value pairs; values may be single-quoted with backslash escapes (libpq's rules).
std::string conninfo_with_database(const std::string& conninfo, const std::string& database) {
    const std::string replacement = "dbname=" + quote_conninfo_value(database);
    std::string result;
    bool replaced = false;
    std::size_t i = 0;
    const std::size_t n = conninfo.size();
    while (i < n && is_space(conninfo[i])) ++i;
    while (i < n) {
        const std::size_t pair_start = i;
        while (i < n && !is_space(conninfo[i]) && conninfo[i] != '=') ++i;
        const std::string key = conninfo.substr(pair_start, i - pair_start);
        while (i < n && is_space(conninfo[i])) ++i;
        if (i >= n || conninfo[i] != '=') throw std::invalid_argument("malformed connection string: missing '=' after " + key);
        ++i;
        while (i < n && is_space(conninfo[i])) ++i;
        if (i < n && conninfo[i] == '\'') {
            for (++i; i < n && conninfo[i] != '\''; ++i) {
                if (conninfo[i] == '\\') ++i;
            }
            if (i >= n) throw std::invalid_argument("malformed connection string: unterminated quote");
            ++i;
        } else {
            while (i < n && !is_space(conninfo[i])) {
                if (conninfo[i] == '\\') ++i;
                ++i;
            }
        }
        const std::size_t pair_end = std::min(i, n);
        if (key == "dbname") {
            result += replacement;
            replaced = true;
        } else {
            result += conninfo.substr(pair_start, pair_end - pair_start);
        }
        while (i < n && is_space(conninfo[i])) ++i;
        if (i < n) result += ' ';
    }
    if (!replaced) {
        if (!result.empty()) result += ' ';
        result += replacement;
    }
    return result;
}

}  // namespace

std::string server_url() {
    const char* url = std::getenv("OUTBOX_TEST_DATABASE_URL");
    if (url == nullptr || *url == '\0') {
        throw std::runtime_error(
            "OUTBOX_TEST_DATABASE_URL is not set: integration tests need a PostgreSQL server whose user may "
            "CREATE DATABASE, e.g. postgresql://postgres@127.0.0.1:5432/postgres (scripts/test.sh starts one)");
    }
    return url;
}

std::string with_user(const std::string& base_url, const std::string& user) {
    if (!is_url(base_url)) return base_url + " user=" + quote_conninfo_value(user);  // the last keyword wins
    const auto authority_start = base_url.find("://") + 3;
    const auto authority_end = std::min(base_url.find_first_of("/?#", authority_start), base_url.size());
    const auto at = base_url.find('@', authority_start);
    const auto host_start = at != std::string::npos && at < authority_end ? at + 1 : authority_start;
    return base_url.substr(0, authority_start) + percent_encode(user) + "@" + base_url.substr(host_start);
}

std::string with_database(const std::string& base_url, const std::string& database) {
    return is_url(base_url) ? url_with_database(base_url, database) : conninfo_with_database(base_url, database);
}

TestDatabase::TestDatabase() {
    static std::atomic<int> counter{0};
    const std::string source = template_database();
    name_ = "outbox_test_" + pid_suffix() + "_" + std::to_string(++counter);
    exec_on_server("CREATE DATABASE " + quote_ident(name_) + " TEMPLATE " + quote_ident(source) + copy_strategy());
    url_ = with_database(server_url(), name_);
}

TestDatabase::~TestDatabase() {
    try {
        exec_on_server("DROP DATABASE IF EXISTS " + quote_ident(name_) + " WITH (FORCE)");
    } catch (...) {
        // A leftover database must not turn a passing test into a crash; the cluster is throwaway.
    }
}

pqxx::result TestDatabase::exec(const std::string& sql) const {
    pqxx::connection conn{url_};
    pqxx::work tx{conn};
    pqxx::result result = tx.exec(sql);
    tx.commit();
    return result;
}

std::string TestDatabase::scalar(const std::string& sql) const {
    const pqxx::result result = exec(sql);
    if (result.empty() || result.columns() == 0) throw std::runtime_error("query returned no value: " + sql);
    return result[0][0].as<std::string>();
}

}  // namespace outbox::test
