// The admin event list (GET /api/v1/admin/outbox-events, keyset paged newest first per
// company) is served by event_publication_company_list_idx (V9) without reading or sorting
// the company's other rows.

#include <cstdio>
#include <string>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "support/pg_fixture.hpp"

namespace {

using outbox::test::TestDatabase;

// The shape of the event list statement (db/event_sql.hpp, kEventList) (first page and a later page).
constexpr const char* kListShape = R"SQL(
EXPLAIN SELECT p.event_id, p.status, p.payload FROM event_publication p
WHERE p.company_id = 'company-7' %s
ORDER BY p.occurred_at DESC, p.event_id DESC
LIMIT 50)SQL";

std::string plan(const TestDatabase& db, const std::string& extra) {
    char sql[512];
    std::snprintf(sql, sizeof sql, kListShape, extra.c_str());
    std::string text;
    for (const auto& row : db.exec(sql)) text += row[0].as<std::string>() + "\n";
    return text;
}

TEST(EventListIndex, PagesOfOneCompanyAreReadFromTheIndexWithoutASort) {
    const TestDatabase db;
    db.exec("INSERT INTO event_publication (company_id, event_type, payload, occurred_at) "
            "SELECT 'company-' || (g % 50), 'ThingHappened', '{}'::jsonb, now() - g * interval '1 second' "
            "FROM generate_series(1, 50000) AS g");
    db.exec("ANALYZE event_publication");
    for (const std::string& extra :
         {std::string(), std::string("AND (p.occurred_at, p.event_id) < (now() - interval '1 hour', "
                                     "'00000000-0000-7000-8000-000000000000'::uuid)")}) {
        const std::string text = plan(db, extra);
        EXPECT_NE(text.find("Index Scan using event_publication_company_list_idx"), std::string::npos) << text;
        EXPECT_EQ(text.find("Sort"), std::string::npos) << text;
        EXPECT_NE(text.find("Index Cond: ("), std::string::npos) << text;
        EXPECT_EQ(text.find("Filter:"), std::string::npos) << "the index answers the company and the page:\n" << text;
    }
}

}  // namespace
