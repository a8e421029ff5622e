// The lease statements read the current time from a parameter (the server's now() unless
// set), so a test moves time instead of waiting for it.
#include <gtest/gtest.h>

#include <pqxx/pqxx>

#include "db/db_session.hpp"
#include "lease/lease_store.hpp"
#include "support/bookkeeping_connection.hpp"
#include "support/pg_fixture.hpp"

namespace outbox::test {
namespace {

using namespace std::chrono_literals;

class LeaseTime : public ::testing::Test {
protected:
    void SetUp() override {
        conn_ = bookkeeping_connection(db_.url());
    }

    /// The server's time `offset` from now, as a timestamptz literal.
    std::string server_time_in(const std::string& offset) {
        return db_.exec("SELECT (now() + interval '" + offset + "')::text")[0][0].c_str();
    }
    std::string field(const std::string& sql) { return db_.exec(sql)[0][0].c_str(); }

    TestDatabase db_;
    std::unique_ptr<pqxx::connection> conn_;
};

TEST_F(LeaseTime, AnEventDueInAnHourIsClaimedOnlyByAStoreWhoseTimeIsPastIt) {
    db_.exec("INSERT INTO event_publication (company_id, event_type, payload, next_attempt_at) "
             "VALUES ('acme', 'TestRequested', '{}', now() + interval '1 hour')");
    lease::LeaseStore store(*conn_);
    EXPECT_TRUE(store.claim({"TestRequested"}, 10, {"h", ""}, 5s).empty());
    store.set_time(server_time_in("59 minutes"));
    EXPECT_TRUE(store.claim({"TestRequested"}, 10, {"h", ""}, 5s).empty());
    const std::string later = server_time_in("61 minutes");
    store.set_time(later);
    ASSERT_EQ(store.claim({"TestRequested"}, 10, {"h", ""}, 5s).size(), 1U);
    // The lease runs from the store's time, not the server's.
    EXPECT_EQ(field("SELECT (lease_expires_at = '" + later + "'::timestamptz + interval '5 seconds')::text "
                    "FROM event_publication"),
              "true");
}

TEST_F(LeaseTime, TheRescuerFindsALeaseExpiredOnlyOnceTheStoresTimeIsPastItsEnd) {
    db_.exec("INSERT INTO event_publication (company_id, event_type, payload) VALUES ('acme', 'TestRequested', '{}')");
    lease::LeaseStore store(*conn_);
    ASSERT_EQ(store.claim({"TestRequested"}, 10, {"h", ""}, 60s).size(), 1U);
    EXPECT_EQ(store.rescue_expired(5, 100), 0);
    store.set_time(server_time_in("59 seconds"));
    EXPECT_EQ(store.rescue_expired(5, 100), 0);
    store.set_time(server_time_in("61 seconds"));
    EXPECT_EQ(store.rescue_expired(5, 100), 1);
    EXPECT_EQ(field("SELECT status || ' ' || last_error_code FROM event_publication"), "RETRY_WAIT WORKER_LOST");
}

TEST_F(LeaseTime, ARetryIsDueItsDelayAfterTheStoresTimeAndAHeartbeatExtendsFromIt) {
    db_.exec("INSERT INTO event_publication (company_id, event_type, payload) "
             "SELECT 'acme', 'TestRequested', '{}' FROM generate_series(1, 2)");
    lease::LeaseStore store(*conn_);
    const auto claimed = store.claim({"TestRequested"}, 10, {"h", ""}, 5s);
    ASSERT_EQ(claimed.size(), 2U);
    const std::string at = server_time_in("3 days");
    store.set_time(at);
    const lease::LeaseRef first{claimed[0].event.id, claimed[0].lease_token};
    const lease::LeaseRef second{claimed[1].event.id, claimed[1].lease_token};
    ASSERT_EQ(store.extend({second}, 7s).size(), 1U);
    EXPECT_EQ(field("SELECT (lease_expires_at = '" + at + "'::timestamptz + interval '7 seconds')::text "
                    "FROM event_publication WHERE event_id = '" + second.event_id + "'"),
              "true");
    core::Transition retry;
    retry.status = core::EventStatus::RetryWait;
    retry.next_attempt_at = std::chrono::system_clock::now() + 10min;
    retry.error_code = "REMOTE_DOWN";
    ASSERT_EQ(store.finish({lease::Finish{first, retry, {}, {}}}).size(), 1U);
    // About ten minutes after the store's time (the delay is measured on the host's clock).
    EXPECT_EQ(field("SELECT (next_attempt_at BETWEEN '" + at + "'::timestamptz + interval '9 minutes' AND '" + at +
                    "'::timestamptz + interval '10 minutes') || ' ' || status FROM event_publication "
                    "WHERE event_id = '" + first.event_id + "'"),
              "true RETRY_WAIT");
}

}  // namespace
}  // namespace outbox::test
