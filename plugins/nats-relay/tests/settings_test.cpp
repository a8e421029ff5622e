// The nats-relay plugin's pure rules: configuration, subject templates and subject matching.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "settings.hpp"

namespace nats_relay {
namespace {

std::string refusal(const std::string& config_json) {
    try {
        parse_settings(config_json);
    } catch (const InvalidConfig& e) {
        return e.what();
    }
    return "";
}

const std::string kGood = R"("servers": ["nats://127.0.0.1:4222"], "stream": "OUTBOX", "event_types": ["OrderPlaced"])";

TEST(NatsRelaySettings, AGoodConfigurationGetsItsDefaults) {
    const Settings settings = parse_settings("{" + kGood + "}");
    EXPECT_EQ(settings.servers, std::vector<std::string>{"nats://127.0.0.1:4222"});
    EXPECT_EQ(settings.stream, "OUTBOX");
    EXPECT_EQ(settings.subject_template, kDefaultSubjectTemplate);
    EXPECT_EQ(settings.publish_timeout, std::chrono::seconds{5});
    EXPECT_TRUE(settings.token.empty());
}

TEST(NatsRelaySettings, PublishTimeoutTakesUnitsAndStaysWithinAMinute) {
    EXPECT_EQ(parse_settings("{" + kGood + R"(, "publish_timeout": "250ms"})").publish_timeout, std::chrono::milliseconds{250});
    EXPECT_EQ(parse_settings("{" + kGood + R"(, "publish_timeout": "1m"})").publish_timeout, std::chrono::minutes{1});
    EXPECT_EQ(parse_settings("{" + kGood + R"(, "publish_timeout": 2})").publish_timeout, std::chrono::seconds{2});
    for (const char* bad : {R"("0s")", R"("61s")", R"("2h")", R"("fast")", "-1", "0", R"("")"}) {
        EXPECT_NE(refusal("{" + kGood + R"(, "publish_timeout": )" + bad + "}").find("config.publish_timeout"), std::string::npos)
            << bad;
    }
}

TEST(NatsRelaySettings, EachBadKeyIsRefusedByName) {
    EXPECT_NE(refusal(R"({"stream": "OUTBOX", "event_types": ["A"]})").find("config.servers"), std::string::npos);
    EXPECT_NE(refusal(R"({"servers": ["nats://h:1"], "event_types": ["A"]})").find("config.stream"), std::string::npos);
    EXPECT_NE(refusal(R"({"servers": ["nats://h:1"], "stream": "S"})").find("config.event_types"), std::string::npos);
    EXPECT_NE(refusal("{" + kGood + R"(, "colour": "blue"})").find("config.colour: unknown key"), std::string::npos);
    EXPECT_NE(refusal(R"({"servers": ["http://h:1"], "stream": "S", "event_types": ["A"]})").find("scheme"), std::string::npos);
    EXPECT_NE(refusal("{" + kGood + R"(, "subject_template": "outbox.<tenant>"})").find("unknown placeholder"),
              std::string::npos);
    EXPECT_NE(refusal("{" + kGood + R"(, "subject_template": "outbox.*.<event_type>"})").find("config.subject_template"),
              std::string::npos);
    EXPECT_EQ(refusal("[]"), "config: expected an object");
}

TEST(NatsRelaySettings, SecretsNeverComeFromTheFileAndNeverAppearInARefusal) {
    const std::string url_with_password = R"({"servers": ["nats://relay:hunter2@h:4222"], "stream": "S", "event_types": ["A"]})";
    const std::string message = refusal(url_with_password);
    EXPECT_NE(message.find("credentials do not belong in the URL"), std::string::npos) << message;
    EXPECT_EQ(message.find("hunter2"), std::string::npos) << "a refusal must not quote the password";
    EXPECT_NE(refusal("{" + kGood + R"(, "token": "s3cr3t"})").find("token_env"), std::string::npos);
    EXPECT_EQ(refusal("{" + kGood + R"(, "token": "s3cr3t"})").find("s3cr3t"), std::string::npos);
    ::unsetenv("NATS_RELAY_TEST_UNSET");
    EXPECT_NE(refusal("{" + kGood + R"(, "token_env": "NATS_RELAY_TEST_UNSET"})").find("is not set"), std::string::npos);
    ::setenv("NATS_RELAY_TEST_TOKEN", "t0ken-value", 1);
    EXPECT_EQ(parse_settings("{" + kGood + R"(, "token_env": "NATS_RELAY_TEST_TOKEN"})").token, "t0ken-value");
    EXPECT_NE(refusal("{" + kGood + R"(, "token_env": "NATS_RELAY_TEST_TOKEN", "credentials_file": "/x.creds"})")
                  .find("not both"),
              std::string::npos);
}

TEST(NatsRelaySubjects, TheTemplateTakesTheCompanyAndTypeUnlessTheCompanyCannotBeAToken) {
    EXPECT_EQ(render_subject(kDefaultSubjectTemplate, "acme", "OrderPlaced"), "outbox.acme.OrderPlaced");
    EXPECT_EQ(render_subject("events.<event_type>", "acme", "OrderPlaced"), "events.OrderPlaced");
    for (const char* bad : {"", "a.b", "a*", "a>", "a b", "a\tb"}) {
        EXPECT_EQ(render_subject(kDefaultSubjectTemplate, bad, "OrderPlaced"), std::nullopt) << '"' << bad << '"';
    }
}

TEST(NatsRelaySubjects, PublishSubjectsHaveNonEmptyTokensAndNoWildcards) {
    EXPECT_TRUE(valid_publish_subject("outbox.acme.OrderPlaced"));
    for (const char* bad : {"", ".a", "a.", "a..b", "a.*", "a.>", "a b", "a\nb"}) {
        EXPECT_FALSE(valid_publish_subject(bad)) << '"' << bad << '"';
    }
}

TEST(NatsRelaySubjects, MatchingFollowsNatsWildcards) {
    EXPECT_TRUE(subject_matches("outbox.>", "outbox.acme.OrderPlaced"));
    EXPECT_FALSE(subject_matches("outbox.>", "outbox"));
    EXPECT_TRUE(subject_matches("outbox.*.OrderPlaced", "outbox.acme.OrderPlaced"));
    EXPECT_FALSE(subject_matches("outbox.*.OrderPlaced", "outbox.acme.eu.OrderPlaced"));
    EXPECT_FALSE(subject_matches("outbox.*", "outbox.acme.OrderPlaced"));
    EXPECT_TRUE(subject_matches("outbox.acme.OrderPlaced", "outbox.acme.OrderPlaced"));
    EXPECT_FALSE(subject_matches("outbox.acme.OrderPlaced", "outbox.acme.OrderShipped"));
}

}  // namespace
}  // namespace nats_relay
