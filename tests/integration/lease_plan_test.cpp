// The plans of the lease statements on a bookkeeping session. A queue table's statistics
// are stale by design: analyzed while a few events were due, it then receives a burst.
// Trusting those statistics, PostgreSQL would read and sort every due row for each claim
// and scan the whole table for each outcome batch.
#include <gtest/gtest.h>

#include <pqxx/pqxx>

#include "db/db_session.hpp"
#include "lease/lease_store.hpp"
#include "support/bookkeeping_connection.hpp"
#include "support/pg_fixture.hpp"

namespace outbox::test {
namespace {

class LeasePlans : public ::testing::Test {
protected:
    void SetUp() override {
        // Statistics taken with 20 due events, then a burst of 50,000.
        db_.exec("INSERT INTO event_publication (company_id, event_type, payload) "
                 "SELECT 'acme', 'TestRequested', '{}' FROM generate_series(1, 20)");
        db_.exec("ANALYZE event_publication");
        db_.exec("INSERT INTO event_publication (company_id, event_type, payload) "
                 "SELECT 'acme', 'TestRequested', '{}' FROM generate_series(1, 50000)");
        conn_ = bookkeeping_connection(db_.url());
    }

    std::string plan(const std::string& statement) {
        std::string text;
        for (const auto& row : pqxx::nontransaction(*conn_).exec("EXPLAIN " + statement)) {
            text += row[0].c_str();
            text += '\n';
        }
        return text;
    }

    TestDatabase db_;
    std::unique_ptr<pqxx::connection> conn_;
};

TEST_F(LeasePlans, TheClaimWalksEachCompanysDueEventsInOrderAndStopsAtItsLimit) {
    lease::LeaseStore store(*conn_);
    store.claim({"NothingOfThisType"}, 1, {"h", ""}, std::chrono::seconds{5});  // declares the statement
    const std::string claim = plan("EXECUTE outbox_claim_fair('{TestRequested}', 1000, 'h', 5000, 'h-incarnation', "
                                   "'', '', '{}', '{}', '{}', 0, false)");
    EXPECT_NE(claim.find("Index Scan using event_publication_company_due_idx"), std::string::npos) << claim;
    EXPECT_NE(claim.find("Index Only Scan using event_publication_company_due_idx"), std::string::npos)
        << "the companies are found one index descent each:\n" << claim;
    EXPECT_EQ(claim.find("Sort"), std::string::npos) << "a sort reads every due row first:\n" << claim;
    EXPECT_EQ(claim.find("Seq Scan on event_publication"), std::string::npos) << claim;
    EXPECT_EQ(claim.find("Bitmap"), std::string::npos) << claim;
    EXPECT_NE(claim.find("Index Cond: (event_id = ANY"), std::string::npos)
        << "the claimed rows are updated by key, not through a join over the primary key:\n" << claim;
}

// Statistics taken while one company filled the table say every row is that company's: a
// plan reading another company's due events through event_publication_due_idx would filter
// the whole backlog at every claim (fair tenants).
TEST_F(LeasePlans, AnotherCompanysDueEventsAreReadFromItsOwnRangeWhateverTheStatistics) {
    db_.exec("ANALYZE event_publication");  // 50,020 rows, all of company acme
    db_.exec("INSERT INTO event_publication (company_id, event_type, payload) "
             "SELECT 'newcomer', 'TestRequested', '{}' FROM generate_series(1, 3)");
    lease::LeaseStore store(*conn_);
    store.claim({"NothingOfThisType"}, 1, {"h", ""}, std::chrono::seconds{5});  // declares the statement
    pqxx::nontransaction(*conn_).exec("SET plan_cache_mode = force_generic_plan");
    const std::string claim = plan("EXECUTE outbox_claim_fair('{TestRequested}', 20, 'h', 5000, 'h-incarnation', "
                                   "'', 'acme', '{}', '{}', '{}', 0, false)");
    pqxx::nontransaction(*conn_).exec("RESET plan_cache_mode");
    EXPECT_EQ(claim.find("event_publication_due_idx"), std::string::npos) << claim;
    // No sort of the company's due rows either (the count of running events may be sorted).
    for (auto at = claim.find("Sort Key:"); at != std::string::npos; at = claim.find("Sort Key:", at + 1)) {
        const std::string line = claim.substr(at, claim.find('\n', at) - at);
        EXPECT_EQ(line.find("next_attempt_at"), std::string::npos) << claim;
    }
}

TEST_F(LeasePlans, TheOutcomeBatchLooksItsEventsUpByKey) {
    lease::LeaseStore store(*conn_);
    store.finish({});  // declares the statement
    const std::string ids =
        pqxx::nontransaction(*conn_).exec1("SELECT array_agg(event_id)::text FROM (SELECT event_id FROM "
                                           "event_publication LIMIT 1000) e")[0].c_str();
    const std::string finish =
        plan("EXECUTE outbox_finish('" + ids + "', '" + ids +
             "', array_fill('COMPLETED'::text, ARRAY[1000]), array_fill(0::bigint, ARRAY[1000]), "
             "array_fill(NULL::text, ARRAY[1000]), '{}', '{}', '', '{}', '{}', '{}', '{}', '{}', '{}', 'h')");
    EXPECT_EQ(finish.find("Seq Scan on event_publication"), std::string::npos) << finish;
    EXPECT_NE(finish.find("Index Cond: (event_id = ANY"), std::string::npos) << finish;
}

}  // namespace
}  // namespace outbox::test
