// GET /api/v1/admin/overview and GET /api/v1/admin/review-groups: what the console's
// overview and review pages show, for the caller's company only (ADMIN, HR and VIEWER).
// Counts, ages and codes only: no payload is ever read.
#include <memory>
#include <optional>
#include <string>

#include <pqxx/pqxx>

#include "admin/endpoints.hpp"
#include "admin/shared_result.hpp"
#include "operations/overview_query.hpp"

namespace outbox::admin {
namespace {

using nlohmann::json;

std::optional<json> compute_overview(AdminContext& context, const Principal& principal, HttpResponse& failure) {
    const auto local = context.handlers();
    json answer;
    if (!context.with_database(principal, failure, [&](pqxx::connection& conn) {
            answer = operations::read_overview(conn, *local, principal.company_id);
        })) {
        return std::nullopt;
    }
    return answer;
}

// Up to this many companies' overviews are kept between refreshes.
constexpr std::size_t kOverviewCompanies = 256;

// Each company's overview is computed at most once per admin.metrics_cache, one computation
// in flight: consoles left open refresh every few seconds, and the finished counts read
// every row of the company (an index over finished events would cost every event one more
// index entry for a page that can be seconds old).
void overview(AdminContext& context, SharedResult<json>& cache, const HttpRequest& req, HttpResponse& res) {
    const auto principal = context.auth().authenticate(req, res);
    if (!principal || !require_reader(*principal, res, "the overview")) return;
    bool computed_here = false;
    HttpResponse failure;
    const auto answer = cache.get(principal->company_id, context.options().metrics_cache,
                                  context.options().statement_timeout + std::chrono::seconds{3}, [&] {
                                      computed_here = true;
                                      return compute_overview(context, *principal, failure);
                                  });
    if (answer) {
        res.body = answer->dump();
    } else if (computed_here) {
        res = std::move(failure);
    } else {
        send_error(res, 503, "BUSY", "the overview is being computed by another request; try again");
    }
}

void review_groups(AdminContext& context, const HttpRequest& req, HttpResponse& res) {
    const auto principal = context.auth().authenticate(req, res);
    if (!principal || !require_reader(*principal, res, "outbox events")) return;
    json groups;
    if (!context.with_database(*principal, res, [&](pqxx::connection& conn) {
            groups = operations::read_review_groups(conn, principal->company_id);
        })) {
        return;
    }
    res.body = groups.dump();
}

}  // namespace

void add_overview_endpoints(Router& router, AdminContext& context) {
    router.add("GET", "/api/v1/admin/overview",
               [&context, cache = std::make_shared<SharedResult<json>>(kOverviewCompanies)](
                   const HttpRequest& req, HttpResponse& res, const PathParams&) { overview(context, *cache, req, res); });
    router.add("GET", "/api/v1/admin/review-groups", [&context](const HttpRequest& req, HttpResponse& res,
                                                                const PathParams&) { review_groups(context, req, res); });
}

}  // namespace outbox::admin
