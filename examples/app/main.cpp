// outbox-example-app: the example application that publishes events through outboxd's C++
// publisher API. Each command commits the business row and its event in one transaction.
//
//   outbox-example-app register-websites --count 500 --duplicates 0.2 --rate 5
//   outbox-example-app complete-missions --count 2000 --users 50 --rate 20
//   outbox-example-app report --admin-url http://127.0.0.1:8082 --classifier-url http://127.0.0.1:8081
#include <array>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <latch>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include <CLI/CLI.hpp>
#include <pqxx/pqxx>

#include "driver.hpp"
#include "events.hpp"
#include "report.hpp"

namespace {

using namespace outbox::examples::app;

std::atomic<bool> g_stop{false};

extern "C" void request_stop(int) { g_stop = true; }

// The 24 solar terms of the East Asian calendar, as identifiers.
constexpr std::array<const char*, 24> kSolarTerms{
    "IPCHUN", "USU",    "GYEONGCHIP", "CHUNBUN", "CHEONGMYEONG", "GOGU",    "IPHA",   "SOMAN",
    "MANGJONG", "HAJI", "SOSEO",      "DAESEO",  "IPCHU",        "CHEOSEO", "BAEGNO", "CHUBUN",
    "HALLO",  "SANGGANG", "IPDONG",   "SOSEOL",  "DAESEOL",      "DONGJI",  "SOHAN",  "DAEHAN"};

std::string random_tag() {
    std::random_device device;
    std::string tag;
    for (int i = 0; i < 6; ++i) tag += static_cast<char>('a' + device() % 26);
    return tag;
}

// A reproducible pseudo-random fraction in [0, 1) for job `index`.
double fraction(long long index, unsigned seed) {
    std::uint64_t x = static_cast<std::uint64_t>(index) * 0x9E3779B97F4A7C15ull + seed;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    return static_cast<double>(x >> 11) / static_cast<double>(1ull << 53);
}

struct Common {
    std::string database_url;
    std::string company = "acme";
    std::string tag;
    double rate = 0;
    int concurrency = 4;
};

void add_common(CLI::App& command, Common& common) {
    command.add_option("--database-url", common.database_url,
                       "PostgreSQL URL (default: $OUTBOX_DATABASE_URL, then $DATABASE_URL)");
    command.add_option("--company", common.company, "company_id (tenant) of the events")->capture_default_str();
    command.add_option("--tag", common.tag, "run tag in domain names and user ids, letters a-z (default: random)");
    command.add_option("--rate", common.rate, "operations per second (0: as fast as possible)")->capture_default_str();
    command.add_option("--concurrency", common.concurrency, "parallel connections")
        ->capture_default_str()
        ->check(CLI::Range(1, 64));
}

void resolve_database_url(std::string& url) {
    for (const char* name : {"OUTBOX_DATABASE_URL", "DATABASE_URL"}) {
        if (!url.empty()) return;
        if (const char* value = std::getenv(name); value != nullptr) url = value;
    }
    if (url.empty()) throw CLI::ValidationError("--database-url", "required (or set OUTBOX_DATABASE_URL)");
}

void resolve(Common& common) {
    resolve_database_url(common.database_url);
    if (common.tag.empty()) common.tag = random_tag();
    for (const char c : common.tag) {
        if (c < 'a' || c > 'z') throw CLI::ValidationError("--tag", "use lower-case letters only");
    }
}

int register_websites(const Common& common, long long count, double duplicates) {
    std::atomic<long long> registrations{0}, twins{0}, created{0};
    std::mutex events_mutex;
    std::set<std::string> events;
    const auto once = [&](pqxx::connection& conn, const std::string& domain) {
        pqxx::work tx(conn);
        const Registration registration = register_website(tx, common.company, domain);
        tx.commit();
        ++registrations;
        if (registration.created) ++created;
        const std::lock_guard lock(events_mutex);
        events.insert(registration.event_id);
    };
    const auto job = [&](long long index, pqxx::connection& conn) {
        const std::string domain = "site-" + common.tag + "-" + std::to_string(index) + ".example.com";
        if (fraction(index, 7) >= duplicates) {
            once(conn, domain);
            return;
        }
        // A second registration of the same domain at the same moment, on its own
        // connection: the case where naive code creates two classification jobs.
        pqxx::connection twin_conn(common.database_url);
        std::latch both_ready(2);
        std::exception_ptr twin_error;
        std::thread twin([&] {
            both_ready.arrive_and_wait();
            try {
                once(twin_conn, domain);
            } catch (...) {
                twin_error = std::current_exception();
            }
        });
        both_ready.arrive_and_wait();
        try {
            once(conn, domain);
        } catch (...) {
            twin.join();
            throw;
        }
        twin.join();
        ++twins;
        if (twin_error) std::rethrow_exception(twin_error);
    };
    const PaceResult result =
        run_paced(common.database_url, {count, common.rate, common.concurrency}, job, g_stop);
    std::cout << "register-websites: tag=" << common.tag << " registrations=" << registrations
              << " concurrent_duplicates=" << twins << " websites_created=" << created
              << " distinct_events=" << events.size() << " failed=" << result.failed << std::endl;
    return result.failed == 0 ? 0 : 1;
}

int complete_missions(const Common& common, long long count, int users, int missions) {
    std::atomic<long long> published{0};
    const auto job = [&](long long index, pqxx::connection& conn) {
        const auto pick = [&](int salt, int range) { return static_cast<int>(fraction(index, salt) * range); };
        const std::int64_t user = first_user_id(common.tag) + pick(11, users);
        const std::int64_t mission = 1 + pick(13, missions);
        pqxx::work tx(conn);
        complete_mission(tx, common.company, user, mission, kSolarTerms[static_cast<std::size_t>(pick(17, 24))]);
        tx.commit();
        ++published;
    };
    const PaceResult result =
        run_paced(common.database_url, {count, common.rate, common.concurrency}, job, g_stop);
    std::cout << "complete-missions: tag=" << common.tag << " published=" << published << " users=" << users
              << " user_ids=" << first_user_id(common.tag) << ".." << first_user_id(common.tag) + users - 1
              << " failed=" << result.failed << std::endl;
    return result.failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    std::signal(SIGINT, request_stop);
    std::signal(SIGTERM, request_stop);

    CLI::App app{"Example application publishing WebsiteRegistered and MissionCompleted events through outboxd"};
    app.require_subcommand(1);

    Common websites_common;
    long long website_count = 100;
    double duplicates = 0.0;
    auto* websites = app.add_subcommand("register-websites", "register websites, each publishing WebsiteRegistered");
    add_common(*websites, websites_common);
    websites->add_option("--count", website_count, "websites to register")->capture_default_str()->check(CLI::PositiveNumber);
    websites->add_option("--duplicates", duplicates, "share of websites registered twice at the same moment")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 1.0));

    Common missions_common;
    long long mission_count = 100;
    int user_count = 10;
    int distinct_missions = 30;
    auto* missions = app.add_subcommand("complete-missions", "record mission completions, each publishing MissionCompleted");
    add_common(*missions, missions_common);
    missions->add_option("--count", mission_count, "completions to record")->capture_default_str()->check(CLI::PositiveNumber);
    missions->add_option("--users", user_count, "distinct users")->capture_default_str()->check(CLI::Range(1, static_cast<int>(kUsersPerTag)));
    missions->add_option("--missions", distinct_missions, "distinct missions")->capture_default_str()->check(CLI::Range(1, 1000000));

    ReportOptions report;
    auto* report_command = app.add_subcommand("report", "print outbox progress and compare the remote services' counts");
    report_command->add_option("--database-url", report.database_url, "PostgreSQL URL (default: $OUTBOX_DATABASE_URL)");
    report_command->add_option("--tag", report.tag, "only this run's websites and users");
    report_command->add_option("--admin-url", report.admin_url, "the stats admin server's base URL");
    report_command->add_option("--classifier-url", report.classifier_url, "the AI classifier's base URL");
    report_command->add_flag("--final", report.final, "print the verdict; exit 1 when the counts disagree");

    try {
        app.parse(argc, argv);
        if (*websites) resolve(websites_common);
        if (*missions) resolve(missions_common);
        if (*report_command) resolve_database_url(report.database_url);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }

    try {
        if (*websites || *missions) {
            // The C++ and SQL checks must not drift: refuse to run with schemas the registry
            // does not match.
            pqxx::connection conn(*websites ? websites_common.database_url : missions_common.database_url);
            const auto problems = registry_mismatches(conn);
            for (const auto& problem : problems) std::cerr << "outbox-example-app: registry mismatch: " << problem << "\n";
            if (!problems.empty()) return 1;
        }
        if (*websites) return register_websites(websites_common, website_count, duplicates);
        if (*missions) return complete_missions(missions_common, mission_count, user_count, distinct_missions);
        return print_report(report) ? 0 : 1;
    } catch (const std::exception& e) {
        std::cerr << "outbox-example-app: " << e.what() << "\n";
        return 1;
    }
}
