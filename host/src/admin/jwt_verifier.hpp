#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <variant>

namespace outbox::admin {

/// Who called the admin API, from a verified token.
struct Principal {
    std::string subject;     // `sub`, recorded as the actor of operator actions
    std::string role;        // `role`: ADMIN, HR or VIEWER (any other value is authenticated but has no access)
    std::string company_id;  // `company_id`: the only tenant whose events the caller may see
};

/// Why a token was refused (HTTP 401). `message` is safe to return: it never echoes the
/// token or any claim value.
struct AuthFailure {
    std::string message;
};

struct JwtOptions {
    std::string hs256_secret;          // OUTBOX_ADMIN_JWT_SECRET
    std::string rs256_public_key_pem;  // contents of admin.jwt_public_key_file
    std::string issuer;                // empty: `iss` not checked
    std::string audience;              // empty: `aud` not checked
    std::chrono::seconds leeway{30};   // clock skew tolerated on exp, nbf and iat
    std::chrono::milliseconds max_lifetime{std::chrono::hours{1}};  // admin.jwt_max_lifetime: longest exp - iat
};

/// Verifies admin bearer tokens with libjwt: HS256 against the shared secret and/or RS256
/// against the public key, whichever is configured. The algorithm is pinned to the
/// configured key type, so an `alg: none` token or an HS256 token "signed" with the RSA
/// public key is refused. Requires `exp` and `iat`, refuses a token issued in the future or
/// whose `exp - iat` exceeds max_lifetime (a stolen token stays useful for that long at
/// most); checks `nbf`, `iss` and `aud` when present or configured; requires string claims
/// `sub`, `role` and `company_id`. Thread-safe (const).
class JwtVerifier {
public:
    explicit JwtVerifier(JwtOptions options);

    /// False when neither a secret nor a public key is configured: every token is refused.
    [[nodiscard]] bool configured() const noexcept;

    [[nodiscard]] std::variant<Principal, AuthFailure> verify(std::string_view token,
                                                              std::chrono::system_clock::time_point now) const;

private:
    JwtOptions options_;
};

}  // namespace outbox::admin
