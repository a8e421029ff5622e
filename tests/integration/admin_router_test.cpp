// The admin router: segment matching without regular expressions, bounded path length.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "admin/router.hpp"

namespace outbox::test {
namespace {

using admin::HttpRequest;
using admin::HttpResponse;
using admin::PathParams;

class AdminRouter : public ::testing::Test {
protected:
    AdminRouter() {
        router_.add("GET", "/healthz", [this](const HttpRequest&, HttpResponse&, const PathParams&) { hit_ = "healthz"; },
                    admin::Lane::Probe);
        router_.add("GET", "/api/v1/admin/outbox-events/{id}",
                    [this](const HttpRequest&, HttpResponse&, const PathParams& p) { hit_ = "get:" + p.at(0); });
        router_.add("POST", "/api/v1/admin/outbox-events/{id}/retry",
                    [this](const HttpRequest&, HttpResponse&, const PathParams& p) { hit_ = "retry:" + p.at(0); });
    }

    HttpResponse run(const std::string& method, const std::string& path) {
        hit_.clear();
        HttpRequest req;
        req.method = method;
        req.path = path;
        HttpResponse res;
        router_.dispatch(req, res);
        return res;
    }

    static std::string code(const HttpResponse& res) {
        return nlohmann::json::parse(res.body).at("error").at("code").get<std::string>();
    }

    admin::Router router_;
    std::string hit_;
};

TEST_F(AdminRouter, MatchesSegmentsAndCapturesPlaceholders) {
    EXPECT_EQ(run("GET", "/api/v1/admin/outbox-events/abc").status, 200);
    EXPECT_EQ(hit_, "get:abc");
    EXPECT_EQ(run("POST", "/api/v1/admin/outbox-events/x-1/retry").status, 200);
    EXPECT_EQ(hit_, "retry:x-1");
    EXPECT_EQ(run("HEAD", "/healthz").status, 200);
    EXPECT_EQ(hit_, "healthz");
}

TEST_F(AdminRouter, AnEmptyOrExtraSegmentDoesNotMatch) {
    for (const char* path : {"/api/v1/admin/outbox-events/", "/api/v1/admin/outbox-events//retry",
                             "/api/v1/admin/outbox-events/a/b", "/healthz/", "healthz", "", "/api/v1/admin"}) {
        const auto res = run("GET", path);
        EXPECT_EQ(res.status, 404) << path;
        EXPECT_EQ(code(res), "NOT_FOUND") << path;
        EXPECT_TRUE(hit_.empty()) << path;
    }
}

TEST_F(AdminRouter, AKnownPathWithAnotherMethodIs405WithAllow) {
    const auto res = run("GET", "/api/v1/admin/outbox-events/abc/retry");
    EXPECT_EQ(res.status, 405);
    EXPECT_EQ(res.header("Allow"), "POST");
    EXPECT_EQ(code(res), "METHOD_NOT_ALLOWED");
}

TEST_F(AdminRouter, AVeryLongPathIs414BeforeAnyMatching) {
    std::string path;
    while (path.size() < 35000) path += "/a";
    const auto res = run("GET", path);
    EXPECT_EQ(res.status, 414);
    EXPECT_EQ(code(res), "URI_TOO_LONG");
    const auto placeholder = run("GET", "/api/v1/admin/outbox-events/" + std::string(35000, 'x'));
    EXPECT_EQ(placeholder.status, 414);
    EXPECT_TRUE(hit_.empty());
}

TEST_F(AdminRouter, ManySegmentsUnderTheLimitAreRoutedWithoutRecursion) {
    std::string path;
    while (path.size() + 2 <= admin::Router::kMaxPathBytes) path += "/a";
    EXPECT_EQ(run("GET", path).status, 404);
    EXPECT_EQ(router_.lane(HttpRequest{"GET", "/healthz", {}, {}, {}}), admin::Lane::Probe);
    EXPECT_EQ(router_.lane(HttpRequest{"GET", "/api/v1/admin/outbox-events/x", {}, {}, {}}), admin::Lane::Api);
}

}  // namespace
}  // namespace outbox::test
