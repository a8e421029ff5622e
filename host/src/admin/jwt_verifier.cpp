#include "admin/jwt_verifier.hpp"

#include <cstdlib>
#include <memory>
#include <optional>

#include <jwt.h>
#include <nlohmann/json.hpp>

namespace outbox::admin {
namespace {

constexpr std::size_t kMaxTokenBytes = 8192;

struct JwtFree {
    void operator()(jwt_t* jwt) const noexcept { jwt_free(jwt); }
};
using JwtPtr = std::unique_ptr<jwt_t, JwtFree>;

struct CharFree {
    void operator()(char* text) const noexcept { std::free(text); }
};

JwtPtr decode(const std::string& token, const std::string* key) {
    jwt_t* raw = nullptr;
    const int rc = key == nullptr
                       ? jwt_decode(&raw, token.c_str(), nullptr, 0)
                       : jwt_decode(&raw, token.c_str(), reinterpret_cast<const unsigned char*>(key->data()),
                                    static_cast<int>(key->size()));
    JwtPtr jwt(raw);
    if (rc != 0) return nullptr;
    return jwt;
}

std::optional<double> numeric_claim(const nlohmann::json& claims, const char* name) {
    const auto found = claims.find(name);
    if (found == claims.end() || !found->is_number()) return std::nullopt;
    return found->get<double>();
}

std::optional<std::string> string_claim(const nlohmann::json& claims, const char* name, std::size_t max_length) {
    const auto found = claims.find(name);
    if (found == claims.end() || !found->is_string()) return std::nullopt;
    std::string value = found->get<std::string>();
    if (value.empty() || value.size() > max_length) return std::nullopt;
    return value;
}

// Claims end up in audit rows, logs and terminals: no control characters (C0, DEL, C1),
// no line or paragraph separators, no bidirectional controls. nlohmann's parser already
// refused invalid UTF-8.
bool printable(std::string_view text) {
    for (std::size_t i = 0; i < text.size();) {
        const auto lead = static_cast<unsigned char>(text[i]);
        if (lead < 0x80) {
            if (lead < 0x20 || lead == 0x7f) return false;
            ++i;
            continue;
        }
        const std::size_t length = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
        if (i + length > text.size()) return false;
        char32_t cp = lead & (length == 2 ? 0x1F : length == 3 ? 0x0F : 0x07);
        for (std::size_t k = 1; k < length; ++k) cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
        if ((cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 || cp == 0x061c || cp == 0x200e ||
            cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069)) {
            return false;
        }
        i += length;
    }
    return true;
}

bool audience_matches(const nlohmann::json& claims, const std::string& audience) {
    const auto found = claims.find("aud");
    if (found == claims.end()) return false;
    if (found->is_string()) return found->get<std::string>() == audience;
    if (found->is_array()) {
        for (const auto& entry : *found) {
            if (entry.is_string() && entry.get<std::string>() == audience) return true;
        }
    }
    return false;
}

}  // namespace

JwtVerifier::JwtVerifier(JwtOptions options) : options_(std::move(options)) {}

bool JwtVerifier::configured() const noexcept {
    return !options_.hs256_secret.empty() || !options_.rs256_public_key_pem.empty();
}

std::variant<Principal, AuthFailure> JwtVerifier::verify(std::string_view token_view,
                                                         std::chrono::system_clock::time_point now) const {
    if (!configured()) return AuthFailure{"no JWT key is configured on this host"};
    if (token_view.empty() || token_view.size() > kMaxTokenBytes) return AuthFailure{"the bearer token is malformed"};
    const std::string token(token_view);

    // The header is read unverified only to pick the key; the algorithm is then pinned to
    // that key's type, which is what stops alg=none and HS256-with-the-public-key tokens.
    const JwtPtr unverified = decode(token, nullptr);
    if (!unverified) return AuthFailure{"the bearer token is malformed"};
    // Decoding without a key resets the object's algorithm to none; the header keeps it.
    const char* alg_name = jwt_get_header(unverified.get(), "alg");
    const jwt_alg_t alg = alg_name == nullptr ? JWT_ALG_INVAL : jwt_str_alg(alg_name);
    const std::string* key = nullptr;
    if (alg == JWT_ALG_HS256 && !options_.hs256_secret.empty()) key = &options_.hs256_secret;
    if (alg == JWT_ALG_RS256 && !options_.rs256_public_key_pem.empty()) key = &options_.rs256_public_key_pem;
    if (key == nullptr) {
        std::string accepted;
        if (!options_.hs256_secret.empty()) accepted = "HS256";
        if (!options_.rs256_public_key_pem.empty()) accepted += accepted.empty() ? "RS256" : " or RS256";
        return AuthFailure{"the token's signing algorithm is not accepted (expected " + accepted + ")"};
    }

    const JwtPtr verified = decode(token, key);
    if (!verified || jwt_get_alg(verified.get()) != alg) {
        return AuthFailure{"the token's signature does not verify"};
    }
    const std::unique_ptr<char, CharFree> grants(jwt_get_grants_json(verified.get(), nullptr));
    if (!grants) return AuthFailure{"the token has no claims"};
    const nlohmann::json claims = nlohmann::json::parse(grants.get(), nullptr, false);
    if (!claims.is_object()) return AuthFailure{"the token's claims are malformed"};

    const double now_s = std::chrono::duration<double>(now.time_since_epoch()).count();
    const double leeway = static_cast<double>(options_.leeway.count());
    const auto exp = numeric_claim(claims, "exp");
    if (!exp) return AuthFailure{"the token has no expiry (exp)"};
    if (now_s > *exp + leeway) return AuthFailure{"the token has expired"};
    const auto iat = numeric_claim(claims, "iat");
    if (!iat) return AuthFailure{"the token has no issue time (iat)"};
    // Without this a token "issued" next year would outlive the lifetime limit.
    if (*iat > now_s + leeway) return AuthFailure{"the token's issue time (iat) is in the future"};
    const double max_lifetime = std::chrono::duration<double>(options_.max_lifetime).count();
    if (*exp - *iat > max_lifetime) {
        return AuthFailure{"the token's lifetime (exp - iat) is longer than this host accepts (admin.jwt_max_lifetime)"};
    }
    if (claims.contains("nbf")) {
        const auto nbf = numeric_claim(claims, "nbf");
        if (!nbf) return AuthFailure{"the token's nbf is malformed"};
        if (now_s + leeway < *nbf) return AuthFailure{"the token is not valid yet (nbf)"};
    }
    if (!options_.issuer.empty()) {
        const auto iss = string_claim(claims, "iss", 1000);
        if (!iss || *iss != options_.issuer) return AuthFailure{"the token's issuer is not accepted"};
    }
    if (!options_.audience.empty() && !audience_matches(claims, options_.audience)) {
        return AuthFailure{"the token's audience is not accepted"};
    }
    auto subject = string_claim(claims, "sub", 200);
    auto role = string_claim(claims, "role", 100);
    auto company = string_claim(claims, "company_id", 100);
    if (!subject || !role || !company) {
        return AuthFailure{"the token must carry string claims sub, role and company_id"};
    }
    if (!printable(*subject) || !printable(*role) || !printable(*company)) {
        return AuthFailure{"the token's sub, role and company_id must not contain control characters"};
    }
    return Principal{std::move(*subject), std::move(*role), std::move(*company)};
}

}  // namespace outbox::admin
