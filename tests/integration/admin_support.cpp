#include "admin_support.hpp"

#include <cstdlib>
#include <memory>
#include <stdexcept>

#include <jwt.h>

#include "support/child_process.hpp"
#include "support/temp_dir.hpp"

namespace outbox::test {
namespace {

struct JwtFree {
    void operator()(jwt_t* jwt) const noexcept { jwt_free(jwt); }
};

std::string mint(const nlohmann::json& claims, jwt_alg_t alg, const std::string& key) {
    jwt_t* raw = nullptr;
    if (jwt_new(&raw) != 0) throw std::runtime_error("jwt_new failed");
    std::unique_ptr<jwt_t, JwtFree> jwt(raw);
    if (jwt_add_grants_json(jwt.get(), claims.dump().c_str()) != 0) throw std::runtime_error("jwt_add_grants_json failed");
    const int rc = alg == JWT_ALG_NONE ? jwt_set_alg(jwt.get(), alg, nullptr, 0)
                                       : jwt_set_alg(jwt.get(), alg, reinterpret_cast<const unsigned char*>(key.data()),
                                                     static_cast<int>(key.size()));
    if (rc != 0) throw std::runtime_error("jwt_set_alg failed");
    char* text = jwt_encode_str(jwt.get());
    if (text == nullptr) throw std::runtime_error("jwt_encode_str failed");
    std::string token(text);
    std::free(text);
    return token;
}

}  // namespace

nlohmann::json token_claims(const std::string& role, const std::string& company, const std::string& subject,
                            std::chrono::seconds ttl) {
    const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    return {{"sub", subject}, {"role", role}, {"company_id", company}, {"iat", now}, {"exp", now + ttl.count()}};
}

std::string mint_hs256(const nlohmann::json& claims, const std::string& secret) {
    return mint(claims, JWT_ALG_HS256, secret);
}

std::string mint_rs256(const nlohmann::json& claims, const std::string& private_key_pem) {
    return mint(claims, JWT_ALG_RS256, private_key_pem);
}

std::string mint_unsigned(const nlohmann::json& claims) { return mint(claims, JWT_ALG_NONE, {}); }

RsaKeyPair generate_rsa_key_pair() {
    const TempDir dir;
    const std::string priv = (dir.path() / "private.pem").string();
    const std::string pub = (dir.path() / "public.pem").string();
    const std::string command = "openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out '" + priv +
                                "' 2>/dev/null && openssl pkey -in '" + priv + "' -pubout -out '" + pub +
                                "' 2>/dev/null";
    if (std::system(command.c_str()) != 0) {
        throw std::runtime_error("cannot generate an RSA key pair: the openssl command-line tool is required");
    }
    return {read_file(priv), read_file(pub)};
}

std::string review_event(const TestDatabase& db, const std::string& company, const std::string& event_type,
                         const std::string& payload) {
    pqxx::connection conn(db.url());
    pqxx::work tx(conn);
    const std::string id =
        tx.exec_params1("SELECT outbox_publish($1, $2, $3::jsonb)::text", company, event_type, payload)[0].as<std::string>();
    tx.exec_params0(
        "UPDATE event_publication SET status = 'REVIEW_REQUIRED', attempt_count = 3, last_error_code = 'HTTP_422', "
        "version = 4, next_attempt_at = now() + interval '1 hour' WHERE event_id = $1::uuid",
        id);
    tx.commit();
    return id;
}

admin::AdminOptions AdminApi::default_options() const {
    admin::AdminOptions options;
    options.listen = {"127.0.0.1", 0};
    options.database_url = db_.url();
    options.jwt.hs256_secret = kTestSecret;
    options.host_id = "test-host";
    options.processing_enabled = false;
    return options;
}

void AdminApi::SetUp() {
    server_ = std::make_unique<admin::AdminServer>(default_options(), metrics_, kNoHandlers);
    server_->start();
}

void AdminApi::TearDown() {
    if (server_) server_->stop();
}

void AdminApi::restart(const std::function<void(admin::AdminOptions&)>& change) {
    server_->stop();
    admin::AdminOptions options = default_options();
    change(options);
    server_ = std::make_unique<admin::AdminServer>(options, metrics_, kNoHandlers);
    server_->start();
}

httplib::Client AdminApi::client() const {
    httplib::Client client("127.0.0.1", server_->port());
    client.set_connection_timeout(std::chrono::seconds{5});
    client.set_read_timeout(std::chrono::seconds{20});
    return client;
}

httplib::Headers AdminApi::bearer(const std::string& token) { return {{"Authorization", "Bearer " + token}}; }

std::string AdminApi::admin_token(const std::string& company) const {
    return mint_hs256(token_claims("ADMIN", company));
}

httplib::Result AdminApi::post_retry(const std::string& id, const nlohmann::json& body, const std::string& key,
                                     const std::string& token) {
    httplib::Headers headers = bearer(token.empty() ? admin_token() : token);
    if (!key.empty()) headers.emplace("Idempotency-Key", key);
    return client().Post(("/api/v1/admin/outbox-events/" + id + "/retry").c_str(), headers, body.dump(),
                         "application/json");
}

}  // namespace outbox::test
