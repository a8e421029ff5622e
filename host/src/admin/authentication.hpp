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
    /// `platform_roles`: admin.platform_roles, the JWT roles of platform operators.
    Authenticator(const JwtOptions& options, std::vector<std::string> platform_roles)
        : verifier_(options), platform_roles_(std::move(platform_roles)) {}

    /// The verified caller; otherwise answers 401 (AUTH_NOT_CONFIGURED, UNAUTHENTICATED or
    /// INVALID_TOKEN, with WWW-Authenticate: Bearer) and returns nullopt.
    std::optional<Principal> authenticate(const HttpRequest& req, HttpResponse& res) const;

    /// For endpoints about the platform rather than one company (the fleet, pausing
    /// handlers): true when the caller's role is one of admin.platform_roles; otherwise
    /// answers 403 FORBIDDEN. Company roles (ADMIN, HR, VIEWER) never pass unless listed.
    bool require_platform_role(const Principal& principal, HttpResponse& res) const;

    [[nodiscard]] bool is_platform_role(const std::string& role) const;

private:
    JwtVerifier verifier_;
    std::vector<std::string> platform_roles_;
};

/// ADMIN, HR and VIEWER may read their company's events.
bool may_read(const Principal& principal);

/// A company role that may read events; otherwise answers 403 FORBIDDEN naming `what`.
bool require_reader(const Principal& principal, HttpResponse& res, const std::string& what);

/// Only ADMIN may change events; otherwise answers 403 FORBIDDEN.
bool require_admin(const Principal& principal, HttpResponse& res, const std::string& what);

}  // namespace outbox::admin
