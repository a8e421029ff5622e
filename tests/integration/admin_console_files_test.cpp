// The operator console's routes on the admin listener: the embedded files with their
// security headers, the redirect, 404 JSON for unknown files, admin.console: false and
// the reverse proxy's token (admin.console_token_header). The pages themselves are tested
// in a browser (tests/browser/console_test.py).
#include <gtest/gtest.h>

#include "admin/console_files.hpp"
#include "integration/admin_support.hpp"

namespace outbox::test {
namespace {

using json = nlohmann::json;

constexpr const char* kPolicy =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

using AdminConsoleFiles = AdminApi;

void expect_console_headers(const httplib::Result& res) {
    EXPECT_EQ(res->get_header_value("Content-Security-Policy"), kPolicy);
    EXPECT_EQ(res->get_header_value("X-Content-Type-Options"), "nosniff");
    EXPECT_EQ(res->get_header_value("Referrer-Policy"), "no-referrer");
    EXPECT_EQ(res->get_header_value("Cache-Control"), "no-store");
}

TEST_F(AdminConsoleFiles, ServesTheEmbeddedFilesWithTheirTypesAndSecurityHeaders) {
    const auto index = client().Get("/console/");
    ASSERT_TRUE(index);
    ASSERT_EQ(index->status, 200);
    EXPECT_EQ(index->get_header_value("Content-Type"), "text/html; charset=utf-8");
    expect_console_headers(index);
    EXPECT_NE(index->body.find("<script src=\"console.js\" defer></script>"), std::string::npos);
    EXPECT_NE(index->body.find("name=\"token\""), std::string::npos);

    for (const auto& [file, type] : {std::pair{"console.js", "text/javascript; charset=utf-8"},
                                     std::pair{"console.css", "text/css; charset=utf-8"},
                                     std::pair{"index.html", "text/html; charset=utf-8"}}) {
        const auto res = client().Get(std::string("/console/") + file);
        ASSERT_TRUE(res);
        EXPECT_EQ(res->status, 200) << file;
        EXPECT_EQ(res->get_header_value("Content-Type"), type) << file;
        expect_console_headers(res);
        const auto& files = admin::console_files();
        const auto embedded = std::find_if(files.begin(), files.end(), [&](const auto& f) { return f.name == file; });
        ASSERT_NE(embedded, files.end()) << file;
        EXPECT_EQ(res->body, embedded->content) << file;
    }
}

// No inline script or style anywhere: the Content-Security-Policy would block it.
TEST_F(AdminConsoleFiles, TheFilesUseNoInlineScriptOrStyle) {
    for (const auto& file : admin::console_files()) {
        const std::string text(file.content);
        EXPECT_EQ(text.find("style=\""), std::string::npos) << file.name;
        EXPECT_EQ(text.find(" onclick="), std::string::npos) << file.name;
        EXPECT_EQ(text.find("innerHTML"), std::string::npos) << file.name;
        EXPECT_EQ(text.find("eval("), std::string::npos) << file.name;
        if (file.name == "index.html") {
            EXPECT_EQ(text.find("<script>"), std::string::npos);
            EXPECT_EQ(text.find("<style"), std::string::npos);
        }
    }
}

TEST_F(AdminConsoleFiles, RedirectsTheBarePathAndAnswersUnknownFilesWithJson) {
    const auto bare = client().Get("/console");
    ASSERT_TRUE(bare);
    EXPECT_EQ(bare->status, 308);
    EXPECT_EQ(bare->get_header_value("Location"), "/console/");

    for (const char* path : {"/console/missing.js", "/console/..%2fconfig", "/console/a/b"}) {
        const auto res = client().Get(path);
        ASSERT_TRUE(res);
        EXPECT_EQ(res->status, 404) << path;
        EXPECT_EQ(json::parse(res->body)["error"]["code"], "NOT_FOUND") << path;
    }
    const auto post = client().Post("/console/", "", "text/plain");
    ASSERT_TRUE(post);
    EXPECT_EQ(post->status, 405);
}

TEST_F(AdminConsoleFiles, TurnedOffItIsNotServed) {
    restart([](admin::AdminOptions& o) { o.console = false; });
    for (const char* path : {"/console/", "/console", "/console/console.js", "/console/session"}) {
        const auto res = client().Get(path);
        ASSERT_TRUE(res);
        EXPECT_EQ(res->status, 404) << path;
        EXPECT_EQ(json::parse(res->body)["error"]["code"], "NOT_FOUND") << path;
    }
    EXPECT_EQ(client().Get("/healthz")->status, 200);
}

TEST_F(AdminConsoleFiles, TheSessionHandsBackTheProxysTokenOnlyWhenConfigured) {
    const std::string jwt = mint_hs256(token_claims("ADMIN", "acme"));
    const httplib::Headers from_proxy{{"X-Auth-Request-Access-Token", jwt}};
    const auto unconfigured = client().Get("/console/session", from_proxy);
    ASSERT_TRUE(unconfigured);
    EXPECT_EQ(unconfigured->status, 404);
    EXPECT_EQ(json::parse(unconfigured->body)["error"]["code"], "NO_CONSOLE_SESSION");

    restart([](admin::AdminOptions& o) { o.console_token_header = "X-Auth-Request-Access-Token"; });
    const auto res = client().Get("/console/session", from_proxy);
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    EXPECT_EQ(json::parse(res->body), (json{{"token", jwt}}));
    EXPECT_EQ(res->get_header_value("Cache-Control"), "no-store");
    const auto absent = client().Get("/console/session");
    ASSERT_TRUE(absent);
    EXPECT_EQ(absent->status, 404);
    EXPECT_EQ(absent->body.find(jwt), std::string::npos);
    // Only a JWT is handed to the page: anything else (here a byte that is not UTF-8, which
    // once ended the process) is refused.
    for (const std::string& bad : std::vector<std::string>{"the-operators-jwt", "a.b.c d", jwt + "\xff", "\xff"}) {
        const auto refused = client().Get("/console/session", {{"X-Auth-Request-Access-Token", bad}});
        ASSERT_TRUE(refused);
        EXPECT_EQ(refused->status, 400) << refused->body;
        EXPECT_EQ(json::parse(refused->body)["error"]["code"], "INVALID_CONSOLE_TOKEN");
    }
}

}  // namespace
}  // namespace outbox::test
