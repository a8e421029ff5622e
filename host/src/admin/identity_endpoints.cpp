// GET /api/v1/admin/me: who the bearer token says the caller is. The console shows it and
// uses it to check a pasted token; it reads no database and grants nothing.
#include "admin/endpoints.hpp"

namespace outbox::admin {
namespace {

void me(const AdminContext& context, const HttpRequest& req, HttpResponse& res) {
    const auto principal = context.auth().authenticate(req, res);
    if (!principal) return;
    // platform_role: whether the fleet and handler pages are open to this caller.
    res.body = nlohmann::json{{"sub", principal->subject},
                              {"role", principal->role},
                              {"company_id", principal->company_id},
                              {"platform_role", context.auth().is_platform_role(principal->role)}}
                   .dump();
}

}  // namespace

void add_identity_endpoints(Router& router, AdminContext& context) {
    router.add("GET", "/api/v1/admin/me",
               [&context](const HttpRequest& req, HttpResponse& res, const PathParams&) { me(context, req, res); });
}

}  // namespace outbox::admin
