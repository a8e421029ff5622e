#pragma once

#include <optional>
#include <string>
#include <vector>

#include "admin/http_message.hpp"
#include "admin/jwt_verifier.hpp"

namespace outbox::admin {

/// Turns a request's `Authorization: Bearer <JWT>` into the caller's Principal, and
/// answers the role checks every endpoint group shares.
class Authenticator {
public:
    explicit Authenticator(const JwtOptions& options) : verifier_(options) {}

    /// The verified caller; otherwise answers 401 (AUTH_NOT_CONFIGURED, UNAUTHENTICATED or
    /// INVALID_TOKEN, with WWW-Authenticate: Bearer) and returns nullopt.
    std::optional<Principal> authenticate(const HttpRequest& req, HttpResponse& res) const;

private:
    JwtVerifier verifier_;
};

/// ADMIN, HR and VIEWER may read their company's events.
bool may_read(const Principal& principal);

/// A company role that may read events; otherwise answers 403 FORBIDDEN naming `what`.
bool require_reader(const Principal& principal, HttpResponse& res, const std::string& what);

/// Fleet-wide actions need one of `platform_roles` (admin.platform_roles); otherwise answers
/// 403 FORBIDDEN. A company's ADMIN is not a platform role unless configured as one.
bool require_platform(const Principal& principal, HttpResponse& res, const std::vector<std::string>& platform_roles,
                      const std::string& what);

/// Only ADMIN may change events; otherwise answers 403 FORBIDDEN.
bool require_admin(const Principal& principal, HttpResponse& res, const std::string& what);

}  // namespace outbox::admin
