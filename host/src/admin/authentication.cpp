#include "admin/authentication.hpp"

#include <algorithm>
#include <cctype>
#include <variant>

#include "admin/error_mapping.hpp"

namespace outbox::admin {

std::optional<Principal> Authenticator::authenticate(const HttpRequest& req, HttpResponse& res) const {
    res.set_header("WWW-Authenticate", "Bearer");
    if (!verifier_.configured()) {
        send_error(res, 401, "AUTH_NOT_CONFIGURED",
                   "admin authentication is not configured on this host: set OUTBOX_ADMIN_JWT_SECRET (HS256) or "
                   "admin.jwt_public_key_file (RS256)");
        return std::nullopt;
    }
    const std::string header = req.header("Authorization").value_or("");
    constexpr std::string_view kScheme = "bearer ";
    const bool bearer = header.size() > kScheme.size() &&
                        std::equal(kScheme.begin(), kScheme.end(), header.begin(), [](char a, char b) {
                            return a == std::tolower(static_cast<unsigned char>(b));
                        });
    if (!bearer) {
        send_error(res, 401, "UNAUTHENTICATED", "an Authorization: Bearer <JWT> header is required");
        return std::nullopt;
    }
    std::string_view token = std::string_view(header).substr(kScheme.size());
    while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
    while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
    // Checked before the verifier sees it. 401 as for any other bad token (RFC 6750's
    // invalid_token), so clients keep one rule: 401 means sign in again.
    if (!is_compact_jws(token)) {
        send_error(res, 401, "INVALID_TOKEN", "the bearer token is not a JWT (three base64url segments joined by dots)");
        return std::nullopt;
    }
    auto verified = verifier_.verify(token, std::chrono::system_clock::now());
    if (auto* failure = std::get_if<AuthFailure>(&verified)) {
        send_error(res, 401, "INVALID_TOKEN", failure->message);
        return std::nullopt;
    }
    res.erase_header("WWW-Authenticate");
    return std::get<Principal>(std::move(verified));
}

bool Authenticator::is_platform_role(const std::string& role) const {
    return std::find(platform_roles_.begin(), platform_roles_.end(), role) != platform_roles_.end();
}

bool Authenticator::require_platform_role(const Principal& principal, HttpResponse& res) const {
    if (is_platform_role(principal.role)) return true;
    send_error(res, 403, "FORBIDDEN", "this endpoint needs a platform role (admin.platform_roles)");
    return false;
}

bool may_read(const Principal& p) { return p.role == "ADMIN" || p.role == "HR" || p.role == "VIEWER"; }

bool require_reader(const Principal& principal, HttpResponse& res, const std::string& what) {
    if (may_read(principal)) return true;
    // The message never echoes a claim: only ADMIN, HR and VIEWER read.
    send_error(res, 403, "FORBIDDEN", "only the ADMIN, HR and VIEWER roles may read " + what);
    return false;
}

bool require_admin(const Principal& principal, HttpResponse& res, const std::string& what) {
    if (principal.role == "ADMIN") return true;
    send_error(res, 403, "FORBIDDEN", "only the ADMIN role may " + what);
    return false;
}

}  // namespace outbox::admin
