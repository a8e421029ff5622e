// JwtVerifier on its own (no server, no database): what libjwt is asked to check and what
// this host checks on top of it.
#include <gtest/gtest.h>

#include "admin/jwt_verifier.hpp"
#include "admin_support.hpp"

namespace outbox::test {
namespace {

using admin::AuthFailure;
using admin::JwtOptions;
using admin::JwtVerifier;
using admin::Principal;
using nlohmann::json;
using namespace std::chrono_literals;

JwtVerifier hs256(std::string issuer = {}, std::string audience = {}) {
    JwtOptions options;
    options.hs256_secret = kTestSecret;
    options.issuer = std::move(issuer);
    options.audience = std::move(audience);
    return JwtVerifier(options);
}

std::string failure_of(const std::variant<Principal, AuthFailure>& result) {
    if (const auto* failure = std::get_if<AuthFailure>(&result)) return failure->message;
    return {};
}

// Tokens are minted against the wall clock, so each check reads it too: a value taken once
// at start-up drifts past the leeway when this suite runs late in the tier.
std::chrono::system_clock::time_point now() { return std::chrono::system_clock::now(); }

TEST(JwtVerifier, AcceptsAValidHs256TokenAndReadsItsClaims) {
    const auto result = hs256().verify(mint_hs256(token_claims("HR", "acme", "bob")), now());
    ASSERT_TRUE(std::holds_alternative<Principal>(result)) << failure_of(result);
    const auto& principal = std::get<Principal>(result);
    EXPECT_EQ(principal.subject, "bob");
    EXPECT_EQ(principal.role, "HR");
    EXPECT_EQ(principal.company_id, "acme");
}

TEST(JwtVerifier, RefusesAnotherSecretsSignature) {
    EXPECT_NE(failure_of(hs256().verify(mint_hs256(token_claims("ADMIN", "acme"), "wrong"), now())), "");
}

TEST(JwtVerifier, RefusesATamperedPayload) {
    std::string token = mint_hs256(token_claims("VIEWER", "acme"));
    const std::string forged = mint_hs256(token_claims("ADMIN", "acme"), "attacker");
    // Header and signature of the original, claims of the forgery.
    const auto first = token.find('.');
    const auto second = token.find('.', first + 1);
    const auto forged_first = forged.find('.');
    const auto forged_second = forged.find('.', forged_first + 1);
    token.replace(first + 1, second - first - 1, forged.substr(forged_first + 1, forged_second - forged_first - 1));
    EXPECT_NE(failure_of(hs256().verify(token, now())), "");
}

TEST(JwtVerifier, ExpiryIsRequiredAndCheckedWithASmallLeeway) {
    json claims = token_claims("ADMIN", "acme");
    claims.erase("exp");
    EXPECT_EQ(failure_of(hs256().verify(mint_hs256(claims), now())), "the token has no expiry (exp)");
    EXPECT_EQ(failure_of(hs256().verify(mint_hs256(token_claims("ADMIN", "acme", "a", -1min)), now())),
              "the token has expired");
    EXPECT_EQ(failure_of(hs256().verify(mint_hs256(token_claims("ADMIN", "acme", "a", -10s)), now())), "")
        << "10s past exp is within the 30s clock-skew leeway";
}

TEST(JwtVerifier, IssueTimeIsRequired) {
    json claims = token_claims("ADMIN", "acme");
    claims.erase("iat");
    EXPECT_EQ(failure_of(hs256().verify(mint_hs256(claims), now())), "the token has no issue time (iat)");
    claims["iat"] = "yesterday";
    EXPECT_EQ(failure_of(hs256().verify(mint_hs256(claims), now())), "the token has no issue time (iat)");
}

TEST(JwtVerifier, ALifetimeLongerThanTheMaximumIsRefused) {
    const char* const too_long =
        "the token's lifetime (exp - iat) is longer than this host accepts (admin.jwt_max_lifetime)";
    EXPECT_EQ(failure_of(hs256().verify(mint_hs256(token_claims("ADMIN", "acme", "a", 1h)), now())), "")
        << "exactly the default maximum of 1h is accepted";
    EXPECT_EQ(failure_of(hs256().verify(mint_hs256(token_claims("ADMIN", "acme", "a", 1h + 1s)), now())), too_long);
    EXPECT_EQ(failure_of(hs256().verify(mint_hs256(token_claims("ADMIN", "acme", "a", 24h * 365)), now())), too_long);

    JwtOptions longer;
    longer.hs256_secret = kTestSecret;
    longer.max_lifetime = 8h;
    EXPECT_EQ(failure_of(JwtVerifier(longer).verify(mint_hs256(token_claims("ADMIN", "acme", "a", 2h)), now())), "");
    JwtOptions shorter = longer;
    shorter.max_lifetime = 5min;
    EXPECT_EQ(failure_of(JwtVerifier(shorter).verify(mint_hs256(token_claims("ADMIN", "acme", "a", 10min)), now())),
              too_long);
}

// Otherwise a token "issued" in a year with exp an hour later would be valid for a year.
TEST(JwtVerifier, ATokenIssuedInTheFutureIsRefused) {
    json claims = token_claims("ADMIN", "acme");
    const long long next_year = claims["iat"].get<long long>() + 365LL * 24 * 3600;
    claims["iat"] = next_year;
    claims["exp"] = next_year + 600;
    EXPECT_EQ(failure_of(hs256().verify(mint_hs256(claims), now())), "the token's issue time (iat) is in the future");
    json skewed = token_claims("ADMIN", "acme");
    skewed["iat"] = skewed["iat"].get<long long>() + 10;
    EXPECT_EQ(failure_of(hs256().verify(mint_hs256(skewed), now())), "") << "10s ahead is within the clock-skew leeway";
}

TEST(JwtVerifier, NotBeforeIsHonoured) {
    json claims = token_claims("ADMIN", "acme");
    claims["nbf"] = claims["exp"];
    EXPECT_EQ(failure_of(hs256().verify(mint_hs256(claims), now())), "the token is not valid yet (nbf)");
}

TEST(JwtVerifier, IssuerAndAudienceAreCheckedWhenConfigured) {
    json claims = token_claims("ADMIN", "acme");
    claims["iss"] = "https://idp.example";
    claims["aud"] = json::array({"other", "outboxd"});
    EXPECT_EQ(failure_of(hs256("https://idp.example", "outboxd").verify(mint_hs256(claims), now())), "");
    EXPECT_EQ(failure_of(hs256("https://evil.example").verify(mint_hs256(claims), now())),
              "the token's issuer is not accepted");
    EXPECT_EQ(failure_of(hs256({}, "payroll").verify(mint_hs256(claims), now())), "the token's audience is not accepted");
    claims.erase("aud");
    EXPECT_EQ(failure_of(hs256({}, "outboxd").verify(mint_hs256(claims), now())), "the token's audience is not accepted");
}

TEST(JwtVerifier, RequiresStringSubRoleAndCompany) {
    for (const char* missing : {"sub", "role", "company_id"}) {
        json claims = token_claims("ADMIN", "acme");
        claims.erase(missing);
        EXPECT_NE(failure_of(hs256().verify(mint_hs256(claims), now())), "") << missing;
    }
    json numeric = token_claims("ADMIN", "acme");
    numeric["company_id"] = 42;
    EXPECT_NE(failure_of(hs256().verify(mint_hs256(numeric), now())), "");
}

TEST(JwtVerifier, ClaimsWithControlCharactersAreRefused) {
    // ESC, newline, DEL, C1 (U+0085, U+009B), line separator, right-to-left override.
    for (const std::string bad : {"\x1b[2Jbob", "bob\nadmin", "bob\x7f", "bob\xc2\x85", "\xc2\x9b" "31m",
                                  "bob\xe2\x80\xa8", "bob\xe2\x80\xae"}) {
        for (const char* claim : {"sub", "role", "company_id"}) {
            json claims = token_claims("ADMIN", "acme", "bob");
            claims[claim] = bad;
            EXPECT_EQ(failure_of(hs256().verify(mint_hs256(claims), now())),
                      "the token's sub, role and company_id must not contain control characters")
                << claim;
        }
    }
    // Printable text outside ASCII is a name like any other.
    const auto result = hs256().verify(mint_hs256(token_claims("ADMIN", "acme", "\xea\xb9\x80 \xeb\xaf\xbc")), now());
    EXPECT_TRUE(std::holds_alternative<Principal>(result)) << failure_of(result);
}

TEST(JwtVerifier, RefusesUnsignedTokensAndGarbage) {
    EXPECT_NE(failure_of(hs256().verify(mint_unsigned(token_claims("ADMIN", "acme")), now())), "");
    EXPECT_NE(failure_of(hs256().verify("not a token", now())), "");
    EXPECT_NE(failure_of(hs256().verify("", now())), "");
    EXPECT_NE(failure_of(hs256().verify(std::string(10000, 'a'), now())), "");
}

TEST(JwtVerifier, Rs256PinsTheAlgorithmToTheKeyType) {
    const RsaKeyPair keys = generate_rsa_key_pair();
    JwtOptions options;
    options.rs256_public_key_pem = keys.public_pem;
    const JwtVerifier verifier(options);
    const auto claims = token_claims("ADMIN", "acme");
    EXPECT_EQ(failure_of(verifier.verify(mint_rs256(claims, keys.private_pem), now())), "");
    EXPECT_NE(failure_of(verifier.verify(mint_hs256(claims, keys.public_pem), now())), "")
        << "an HS256 token keyed with the (public) RSA key must not pass";
    const RsaKeyPair other = generate_rsa_key_pair();
    EXPECT_NE(failure_of(verifier.verify(mint_rs256(claims, other.private_pem), now())), "");
}

TEST(JwtVerifier, WithoutAKeyNothingVerifies) {
    const JwtVerifier verifier{JwtOptions{}};
    EXPECT_FALSE(verifier.configured());
    EXPECT_NE(failure_of(verifier.verify(mint_hs256(token_claims("ADMIN", "acme")), now())), "");
}

}  // namespace
}  // namespace outbox::test
