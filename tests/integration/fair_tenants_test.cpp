// Fair tenants: claims share the fleet between companies by weight, take turns among many
// companies, and keep each company's cap on events in flight across hosts; a company's
// backlog does not delay another company's new events.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <thread>

#include <pqxx/pqxx>

#include "lease/lease_store.hpp"
#include "support/bookkeeping_connection.hpp"
#include "support/pg_fixture.hpp"
#include "support/test_host.hpp"

namespace outbox::test {
namespace {

using namespace std::chrono_literals;

class FairClaims : public ::testing::Test {
protected:
    void publish(const std::string& company, int count) {
        db_.exec("INSERT INTO event_publication (company_id, event_type, payload) SELECT '" + company +
                 "', 'TestRequested', '{}' FROM generate_series(1, " + std::to_string(count) + ")");
    }
    int processing(const std::string& company) {
        return std::stoi(db_.scalar("SELECT count(*) FROM event_publication WHERE status = 'PROCESSING' AND "
                                    "company_id = '" + company + "'"));
    }
    static int of(const std::vector<lease::ClaimedEvent>& claimed, const std::string& company) {
        return static_cast<int>(std::count_if(claimed.begin(), claimed.end(),
                                              [&](const auto& item) { return item.event.company_id == company; }));
    }

    TestDatabase db_;
};

TEST_F(FairClaims, AClaimIsSharedBetweenCompaniesByWeightWhateverTheirBacklog) {
    publish("big", 5000);  // published first: in next_attempt_at order all of it comes first
    publish("small", 100);
    auto conn = bookkeeping_connection(db_.url());
    lease::LeaseStore store(*conn);
    const auto equal = store.claim({"TestRequested"}, 20, {"h", ""}, 30s);
    EXPECT_EQ(of(equal, "big"), 10);
    EXPECT_EQ(of(equal, "small"), 10);

    const auto shares = lease::tenant_shares_of({{"big", 3}}, {}, 0);
    lease::FairCursor cursor;
    const auto weighted = store.claim({"TestRequested"}, 20, {"h", ""}, 30s, lease::ClaimKind::Normal, &shares, &cursor);
    EXPECT_EQ(of(weighted, "big"), 15) << "weight 3 against 1";
    EXPECT_EQ(of(weighted, "small"), 5);
    EXPECT_TRUE(cursor.more_due);
}

TEST_F(FairClaims, ALeftoverShareIsNotLostAndADrainedQueueSaysSo) {
    publish("alone", 7);
    auto conn = bookkeeping_connection(db_.url());
    lease::LeaseStore store(*conn);
    lease::FairCursor cursor;
    EXPECT_EQ(store.claim({"TestRequested"}, 20, {"h", ""}, 30s, lease::ClaimKind::Normal, nullptr, &cursor).size(), 7U);
    EXPECT_FALSE(cursor.more_due) << "every due event was taken";
    publish("alone", 30);
    EXPECT_EQ(store.claim({"TestRequested"}, 20, {"h", ""}, 30s, lease::ClaimKind::Normal, nullptr, &cursor).size(), 20U);
    EXPECT_TRUE(cursor.more_due);
}

TEST_F(FairClaims, ClaimsTakeTurnsWhenMoreCompaniesHaveWorkThanAClaimTakes) {
    for (int i = 0; i < 30; ++i) publish("company-" + std::to_string(100 + i), 5);
    auto conn = bookkeeping_connection(db_.url());
    lease::LeaseStore store(*conn);
    lease::FairCursor cursor;
    std::set<std::string> served;
    for (int round = 0; round < 3; ++round) {
        const auto claimed = store.claim({"TestRequested"}, 10, {"h", ""}, 30s, lease::ClaimKind::Normal, nullptr, &cursor);
        ASSERT_EQ(claimed.size(), 10U);
        for (const auto& item : claimed) {
            EXPECT_TRUE(served.insert(item.event.company_id).second)
                << item.event.company_id << " served twice before every company was served once";
        }
    }
    EXPECT_EQ(served.size(), 30U);
}

TEST_F(FairClaims, ACapCountsTheCompanysEventsInFlightOnEveryHost) {
    publish("capped", 50);
    publish("free", 50);
    auto first = bookkeeping_connection(db_.url());
    auto second = bookkeeping_connection(db_.url());
    lease::LeaseStore host_a(*first);
    lease::LeaseStore host_b(*second);
    const auto shares = lease::tenant_shares_of({}, {{"capped", 3}}, 0);
    const auto a = host_a.claim({"TestRequested"}, 20, {"a", ""}, 30s, lease::ClaimKind::Normal, &shares);
    const auto b = host_b.claim({"TestRequested"}, 20, {"b", ""}, 30s, lease::ClaimKind::Normal, &shares);
    EXPECT_EQ(of(a, "capped") + of(b, "capped"), 3);
    EXPECT_EQ(processing("capped"), 3);
    EXPECT_EQ(of(a, "free"), 10) << "another company is not held back by the cap";
    EXPECT_EQ(of(b, "free"), 10);

    // A finished event frees one place.
    const auto& done = of(a, "capped") > 0 ? a : b;
    const auto it = std::find_if(done.begin(), done.end(), [](const auto& item) { return item.event.company_id == "capped"; });
    lease::LeaseStore& owner = &done == &a ? host_a : host_b;
    ASSERT_EQ(owner.finish({lease::Finish{{it->event.id, it->lease_token}, core::Transition{core::EventStatus::Completed, {}, {}}, {}, {}}}).size(), 1U);
    const auto more = host_b.claim({"TestRequested"}, 20, {"b", ""}, 30s, lease::ClaimKind::Normal, &shares);
    EXPECT_EQ(of(more, "capped"), 1);

    // The default cap applies to every company without a cap of its own.
    // "free" already has 30 in flight, over the default cap: it gets none.
    publish("other", 50);
    const auto defaults = lease::tenant_shares_of({}, {{"capped", 3}}, 12);
    const auto capped_by_default = host_a.claim({"TestRequested"}, 100, {"a", ""}, 30s, lease::ClaimKind::Normal, &defaults);
    EXPECT_EQ(of(capped_by_default, "other"), 12);
    EXPECT_EQ(of(capped_by_default, "free"), 0);
    EXPECT_EQ(of(capped_by_default, "capped"), 0);
    EXPECT_EQ(processing("capped"), 3);
}

TEST_F(FairClaims, ConcurrentClaimersNeverExceedACap) {
    constexpr int kCap = 5;
    publish("capped", 400);
    const auto shares = lease::tenant_shares_of({}, {{"capped", kCap}}, 0);
    std::atomic<int> worst{0};
    std::atomic<bool> failed{false};
    std::vector<std::thread> hosts;
    for (int h = 0; h < 4; ++h) {
        hosts.emplace_back([&, h] {
            try {
                auto conn = bookkeeping_connection(db_.url());
                lease::LeaseStore store(*conn);
                pqxx::connection probe(db_.url());
                for (int round = 0; round < 40; ++round) {
                    const auto claimed = store.claim({"TestRequested"}, 3, {"h" + std::to_string(h), ""}, 30s,
                                                     lease::ClaimKind::Normal, &shares);
                    const int running = pqxx::nontransaction(probe)
                                            .exec1("SELECT count(*) FROM event_publication WHERE status = 'PROCESSING'")[0]
                                            .as<int>();
                    int seen = worst.load();
                    while (running > seen && !worst.compare_exchange_weak(seen, running)) {
                    }
                    std::vector<lease::Finish> finished;
                    for (const auto& item : claimed) {
                        finished.push_back({{item.event.id, item.lease_token},
                                            core::Transition{core::EventStatus::Completed, {}, {}}, {}, {}});
                    }
                    store.finish(finished);
                }
            } catch (const std::exception& e) {
                failed = true;
                ADD_FAILURE() << e.what();
            }
        });
    }
    for (auto& host : hosts) host.join();
    ASSERT_FALSE(failed.load());
    EXPECT_LE(worst.load(), kCap) << "events of the capped company in flight at once";
    EXPECT_GT(std::stoi(db_.scalar("SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'")), 100)
        << "the claimers did take turns";
}

config::Config host_config(const std::string& url, const std::string& host_id) {
    const dispatch::RuntimeOptions options = fast_options(url, host_id);
    config::Config config;
    config.outbox = options;
    config.database.url = url;
    config.database.pool_size = options.pool_size;
    config.database.startup_timeout = 0ms;
    config.admin.listen = "off";
    config.admin.listen_address.reset();
    return config;
}

// Flow control item 1, scaled to CI: company A's backlog takes the host about 9 s; B's
// events, published one every 50 ms meanwhile, start within 2 s of their publication (p99).
// Claims in next_attempt_at order would start each of them only after every earlier A event.
TEST(FairTenants, ABacklogOfOneCompanyDoesNotDelayAnotherCompanysNewEvents) {
    TestDatabase db;
    create_scripted_effect_table(db.url());
    constexpr int kBacklog = 3000;
    constexpr int kNew = 40;
    // 10 to 15 ms per call, 4 workers: about 9 s of A's work, more on a loaded machine; B
    // publishes for about 2 s.
    publish_many(db.url(), "TestRequested", R"({"sleep_ms": 10})", kBacklog, "company-a");
    TestHost host(host_config(db.url(), "fair-host"), {OUTBOX_FIXTURE_SCRIPTED});
    host.start();
    ASSERT_TRUE(wait_until([&] { return db.scalar("SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'") != "0"; },
                           30s));
    {
        pqxx::connection publisher(db.url());
        for (int i = 0; i < kNew; ++i) {
            pqxx::work tx(publisher);
            tx.exec("SELECT outbox_publish('company-b', 'TestRequested', '{\"db\": true, \"db_at_start\": true}')");
            tx.commit();
            std::this_thread::sleep_for(50ms);
        }
    }
    const int a_done_when_b_published = std::stoi(db.scalar(
        "SELECT count(*) FROM event_publication WHERE company_id = 'company-a' AND status = 'COMPLETED'"));
    ASSERT_TRUE(wait_until([&] { return db.scalar("SELECT count(*) FROM scripted_effect") == std::to_string(kNew); },
                           60s));
    const int a_done_when_b_ran = std::stoi(db.scalar(
        "SELECT count(*) FROM event_publication WHERE company_id = 'company-a' AND status = 'COMPLETED'"));
    host.stop();

    // Start (the host's clock) minus publication (the database's): one machine, one clock.
    std::vector<double> waits;
    for (const auto& row : db.exec("SELECT extract(epoch FROM s.at - e.occurred_at)::float8 FROM scripted_effect s "
                                   "JOIN event_publication e USING (event_id) ORDER BY 1")) {
        waits.push_back(row[0].as<double>());
    }
    ASSERT_EQ(waits.size(), static_cast<std::size_t>(kNew));
    const double p99 = waits[static_cast<std::size_t>(0.99 * (kNew - 1))];
    EXPECT_LT(p99, 2.0) << "B's events waited behind A's backlog; the slowest waited " << waits.back() << " s";
    EXPECT_LT(a_done_when_b_published, kBacklog) << "A's backlog outlived B's publishing, or the test proves nothing";
    EXPECT_LT(a_done_when_b_ran, kBacklog) << "B ran only once A's backlog was gone";
}

// A cap holds across hosts running real calls: company A's events never run more than its
// cap at once on two hosts together, while company B's run beside them.
TEST(FairTenants, TwoHostsKeepACompanysCapWhileOthersRunBeside) {
    TestDatabase db;
    create_scripted_effect_table(db.url());
    constexpr int kCap = 2;
    constexpr int kEvents = 16;
    // Each row records when its call started; a call lasts at least its 150 ms sleep.
    publish_many(db.url(), "TestRequested", R"({"sleep_ms": 150, "db": true, "db_at_start": true})", kEvents,
                 "company-a");
    publish_many(db.url(), "TestRequested", R"({"sleep_ms": 150})", kEvents, "company-b");
    std::vector<std::unique_ptr<TestHost>> hosts;
    for (int i = 0; i < 2; ++i) {
        config::Config config = host_config(db.url(), "cap-host-" + std::to_string(i));
        config.tenants.companies["company-a"].max_concurrency = kCap;
        hosts.push_back(std::make_unique<TestHost>(config, std::vector<std::string>{OUTBOX_FIXTURE_SCRIPTED}));
    }
    for (auto& host : hosts) host->start();
    ASSERT_TRUE(wait_until([&] { return db.scalar("SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'") ==
                                        std::to_string(2 * kEvents); },
                           60s));
    for (auto& host : hosts) host->stop();
    // Starts within one call's length of each other were in flight together.
    EXPECT_LE(worst_call_overlap(scripted_effect_times(db.url()), 0.150), kCap);
    // Both hosts were claiming throughout (B's events are uncapped); which of them runs A's
    // next event is a race, and a cap counted per host would have let each run two.
    EXPECT_EQ(db.scalar("SELECT count(DISTINCT host) FROM outbox_attempt"), "2") << "both hosts ran events";
}

}  // namespace
}  // namespace outbox::test
