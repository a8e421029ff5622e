// The event-type registry: `outboxd event-types apply|list`, the registry file's rules, and
// outbox_publish() applying exactly SafePayload's rules to registered types (one case list
// run through both).
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "outbox/sdk/registry.hpp"
#include "registry/event_types.hpp"
#include "support/child_process.hpp"
#include "support/pg_fixture.hpp"
#include "support/temp_dir.hpp"

namespace outbox::test {
namespace {

using nlohmann::json;

const char* kCaseTypes = R"YAML(
event_types:
  CaseChecked:
    fields:
      s: {type: string, max_length: 40}
      id: {type: string, identifier: true, max_length: 40}
      i: {type: integer}
      iid: {type: integer, identifier: true}
      n: {type: number}
      b: {type: boolean}
      d: {type: string}
)YAML";

struct Case {
    std::string field;
    std::string value_json;
};

// Every rule of SafePayload, on both sides of each boundary.
const std::vector<Case> kCases = {
    // string
    {"s", R"("SUMMER")"}, {"s", R"("")"}, {"s", R"("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")"},
    {"s", R"("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")"},
    {"s", "\"\xea\xb0\x80\xea\xb0\x80\xea\xb0\x80\xea\xb0\x80\xea\xb0\x80\xea\xb0\x80\xea\xb0\x80\xea\xb0\x80\xea\xb0\x80\xea\xb0\x80\xea\xb0\x80\xea\xb0\x80\xea\xb0\x80\""},
    {"s", "\"\xea\xb0\x80\xea\xb0\x80\xea\xb0\x80\xea\xb0\x80\xea\xb0\x80\xea\xb0\x80\xea\xb0\x80\xea\xb0\x80\xea\xb0\x80\xea\xb0\x80\xea\xb0\x80\xea\xb0\x80\xea\xb0\x80\xea\xb0\x80\""},
    {"s", R"("user@example.com")"}, {"s", R"("a @b.c")"}, {"s", R"("@example.com")"}, {"s", R"("x@y.")"},
    {"s", R"("x@.y")"}, {"s", R"("x@y.z")"}, {"s", R"("x\t@y.z")"}, {"s", R"("x@y z.w")"}, {"s", R"("x@@y.z")"},
    {"s", R"("x@y\t.z")"}, {"s", R"("eyJhbGciOi.eyJzdWIi.c2lnbmF0")"}, {"s", R"("eyJa.b")"}, {"s", R"("eyJa.b.")"},
    {"s", R"("eyJa.b.c.")"}, {"s", R"("eyJa.b.cd.")"}, {"s", R"("token eyJa.b.c end")"}, {"s", R"("eyJa..b.c")"},
    {"s", R"("eyJa.b.c.d")"}, {"s", R"("see eyJa.b.c.")"}, {"s", "\"(eyJa.b.c)\""}, {"s", R"("say \"eyJa.b.c\"")"},
    {"s", R"("[eyJa.b.c.d].")"}, {"s", "\"ann\xef\xbc\xa0" "ex.com\""}, {"s", "\"ann\xef\xb9\xab" "ex.com\""},
    {"s", "\"tel \xef\xbc\x90\xef\xbc\x91\xef\xbc\x90 1234 5678\""},
    {"s", "\"\xd9\xa1\xd9\xa2\xd9\xa3\xd9\xa4\xd9\xa5\xd9\xa6\xd9\xa7\xd9\xa8\""},
    {"s", "\"\xd9\xa1\xd9\xa2\xd9\xa3\xd9\xa4\xd9\xa5\xd9\xa6\xd9\xa7\xd9\xa8\xd9\xa9\""},
    {"s", "\"\xef\xbc\x94\xef\xbc\x92 items\""}, {"s", R"("12345678")"}, {"s", R"("123456789")"}, {"s", R"("010-1234-5678")"},
    {"s", R"("12 34 56 78 9")"}, {"s", R"("1234a56789")"}, {"s", R"("(12) 345+678.9")"}, {"s", R"("1234/56789")"},
    {"s", "42"}, {"s", "true"}, {"s", "null"},
    // string, default max_length 256
    {"d", "\"" + std::string(256, 'a') + "\""}, {"d", "\"" + std::string(257, 'a') + "\""},
    // identifier string
    {"id", R"("mission-42")"}, {"id", R"("SUMMER_SOLSTICE")"}, {"id", R"("a b")"}, {"id", R"("user@x.y")"},
    {"id", R"("1234567890123")"}, {"id", R"("123456789012")"}, {"id", R"("010-1234-5678")"},
    {"id", R"("12.34.56.78.9")"}, {"id", R"("12.34.56.78")"}, {"id", R"("v1.2.3")"}, {"id", R"("ab-123456789")"},
    {"id", R"("eyJa.b.c")"}, {"id", R"("eyJa.b.c.")"}, {"id", R"("eyJa.b.")"}, {"id", R"("eyJa.b.c.d.")"}, {"id", R"("550e8400-e29b-41d4-a716-446655440000")"}, {"id", R"("ns:item.7")"},
    {"id", R"("a/b")"}, {"id", R"("")"}, {"id", "\"" + std::string(41, 'x') + "\""}, {"id", "7"},
    // integer
    {"i", "42"}, {"i", "-7"}, {"i", "0"}, {"i", "9223372036854775807"}, {"i", "9223372036854775808"},
    {"i", "-9223372036854775808"}, {"i", "-9223372036854775809"}, {"i", "1.5"}, {"i", "5.0"}, {"i", R"("42")"},
    {"i", "true"}, {"i", "null"}, {"i", "12345678901234"}, {"iid", "12345678901234"}, {"iid", R"("12")"},
    // number
    {"n", "1.5"}, {"n", "5"}, {"n", "-0.25"}, {"n", R"("1.5")"}, {"n", "true"}, {"n", "null"},
    // boolean
    {"b", "true"}, {"b", "false"}, {"b", "1"}, {"b", R"("true")"}, {"b", "null"},
    // not declared
    {"email", R"("x")"}, {"other", "1"},
};

// What a C++ publisher gets from SafePayload for this value: the overload a value of this
// JSON kind selects (a JSON integer given to a number field is sent as a double, as a
// publisher holding a double would).
bool safe_payload_accepts(const sdk::PayloadSchema& schema, const std::string& field, const json& value) {
    sdk::SafePayload payload(schema);
    try {
        const sdk::FieldSpec* spec = schema.find(field);
        if (value.is_string()) {
            payload.set(field, value.get<std::string>());
        } else if (value.is_boolean()) {
            payload.set(field, value.get<bool>());
        } else if (value.is_number_integer() && spec != nullptr && spec->kind == sdk::FieldKind::Number) {
            payload.set(field, value.get<double>());
        } else if (value.is_number_unsigned()) {
            payload.set(field, value.get<std::uint64_t>());
        } else if (value.is_number_integer()) {
            payload.set(field, value.get<std::int64_t>());
        } else if (value.is_number_float()) {
            payload.set(field, value.get<double>());
        } else {
            return false;  // null: SafePayload has no way to set it
        }
        (void)payload.json();
        return true;
    } catch (const sdk::PayloadError&) {
        return false;
    }
}

class Registry : public ::testing::Test {
protected:
    long long count(const std::string& sql) const { return std::stoll(db_.scalar(sql)); }
    registry::ApplyResult apply(const std::string& yaml, std::optional<bool> require = std::nullopt) {
        pqxx::connection conn(db_.url());
        return registry::apply_registry(conn, registry::parse_registry(yaml, "test.yaml"), require, "cli:test");
    }
    std::map<std::string, std::string> env() const { return {{"OUTBOX_DATABASE_URL", db_.url()}}; }

    TestDatabase db_;
};

TEST_F(Registry, OutboxPublishAndSafePayloadDecideEveryCaseAlike) {
    apply(kCaseTypes);
    pqxx::connection conn(db_.url());
    const auto fields = json::parse(db_.scalar("SELECT fields::text FROM outbox_event_type WHERE event_type = 'CaseChecked'"));
    const sdk::PayloadSchema schema = sdk::schema_from_registry(fields);
    int accepted = 0;
    for (const auto& c : kCases) {
        const json value = json::parse(c.value_json);
        const bool cpp = safe_payload_accepts(schema, c.field, value);
        bool sql = true;
        std::string message;
        const json payload{{c.field, value}};
        pqxx::work tx(conn);
        try {
            tx.exec_params("SELECT outbox_publish('acme', 'CaseChecked', $1::jsonb)", payload.dump());
            tx.commit();
        } catch (const pqxx::sql_error& e) {
            sql = false;
            message = e.what();
            EXPECT_EQ(e.sqlstate(), "22023") << c.field << " " << c.value_json;
            EXPECT_NE(message.find("\"" + c.field + "\""), std::string::npos) << "names the field: " << message;
            if (value.is_string() && value.get<std::string>().size() > 5) {
                EXPECT_EQ(message.find(value.get<std::string>()), std::string::npos) << "never the value: " << message;
            }
        }
        EXPECT_EQ(cpp, sql) << "field " << c.field << " value " << c.value_json << " C++ "
                            << (cpp ? "accepts" : "refuses") << ", SQL " << (sql ? "accepts" : "refuses: " + message);
        accepted += sql ? 1 : 0;
    }
    EXPECT_EQ(count("SELECT count(*) FROM event_publication"), accepted) << "a refused publish inserts nothing";
    EXPECT_GT(accepted, 20);
    EXPECT_LT(accepted, static_cast<int>(kCases.size()) - 20);
}

TEST_F(Registry, UnregisteredTypesPassUnlessRequiredAndRegisteredOnesAreChecked) {
    pqxx::connection conn(db_.url());
    const auto publish = [&](const std::string& type, const std::string& payload) {
        pqxx::work tx(conn);
        tx.exec_params("SELECT outbox_publish('acme', $1, $2::jsonb)", type, payload);
        tx.commit();
    };
    EXPECT_NO_THROW(publish("Unregistered", R"({"email": "a@b.cd"})")) << "nothing registered: as before";
    apply("event_types: {MissionCompleted: {fields: {user_id: {type: integer, identifier: true}}}}", true);
    EXPECT_EQ(db_.scalar("SELECT value::text FROM outbox_setting WHERE name = 'require_registered_types'"), "true");
    try {
        publish("Unregistered", "{}");
        ADD_FAILURE() << "an unregistered type must be refused";
    } catch (const pqxx::sql_error& e) {
        EXPECT_EQ(e.sqlstate(), "22023");
        EXPECT_NE(std::string(e.what()).find("outbox.require_registered_types"), std::string::npos) << e.what();
    }
    EXPECT_NO_THROW(publish("MissionCompleted", R"({"user_id": 12345678901234})"));
    EXPECT_THROW(publish("MissionCompleted", R"({"user_id": "7"})"), pqxx::sql_error);
    apply("event_types: {MissionCompleted: {fields: {user_id: {type: integer, identifier: true}}}}", false);
    EXPECT_NO_THROW(publish("Unregistered", "{}"));
    EXPECT_EQ(count("SELECT count(*) FROM event_publication"), 3);
}

TEST_F(Registry, ApplyIsIdempotentVersionedAndAudited) {
    const std::string v1 = "event_types: {A: {fields: {x: {type: integer}}}, B: {fields: {y: {type: boolean}}}}";
    auto first = apply(v1);
    ASSERT_EQ(first.types.size(), 2u);
    EXPECT_EQ(first.types[0].change, registry::AppliedType::Change::Added);
    EXPECT_EQ(first.types[0].version, 1);
    auto again = apply(v1);
    EXPECT_EQ(again.types[0].change, registry::AppliedType::Change::Unchanged);
    EXPECT_EQ(again.types[1].change, registry::AppliedType::Change::Unchanged);
    EXPECT_EQ(again.types[0].version, 1);
    auto changed = apply("event_types: {A: {fields: {x: {type: number}, z: {type: string, max_length: 9}}}}");
    ASSERT_EQ(changed.types.size(), 1u);
    EXPECT_EQ(changed.types[0].change, registry::AppliedType::Change::Changed);
    EXPECT_EQ(changed.types[0].version, 2);
    EXPECT_EQ(changed.types[0].detail, "~x, +z");
    EXPECT_EQ(changed.not_in_file, std::vector<std::string>{"B"}) << "types not in the file are kept";
    EXPECT_EQ(count("SELECT count(*) FROM audit_event WHERE action = 'outbox.event_type_applied'"), 3);
    EXPECT_EQ(db_.scalar("SELECT fields->'z'->>'max_length' FROM outbox_event_type WHERE event_type = 'A'"), "9");
    EXPECT_EQ(db_.scalar("SELECT fields->'x'->>'type' || version FROM outbox_event_type WHERE event_type = 'A'"), "number2");
}

TEST_F(Registry, BadFilesAreOneClearLine) {
    const auto error_of = [](const std::string& yaml) {
        try {
            registry::parse_registry(yaml, "types.yaml");
        } catch (const registry::RegistryFileError& e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    EXPECT_EQ(error_of("event_types: {A: {fields: {x: {type: strng}}}}"),
              "types.yaml: event_types.A.fields.x.type: 'strng' is not one of string, integer, number, boolean");
    EXPECT_EQ(error_of("event_types: {A: {fields: {x: {type: integer, max_length: 4}}}}"),
              "types.yaml: event_types.A.fields.x.max_length: only string fields have a max_length");
    EXPECT_EQ(error_of("event_types: {A: {fields: {x: {type: string, max_length: 0}}}}"),
              "types.yaml: event_types.A.fields.x.max_length: '0' is not a whole number from 1 to 8192");
    EXPECT_EQ(error_of("event_types: {A: {fields: {x: {type: string, identifier: maybe}}}}"),
              "types.yaml: event_types.A.fields.x.identifier: 'maybe' is not true or false");
    EXPECT_EQ(error_of("event_types: {A: {fields: {x: {type: string, pii: no}}}}"),
              "types.yaml: event_types.A.fields.x.pii: unknown key; allowed: type, max_length, identifier");
    EXPECT_EQ(error_of("event_types: {lower: {fields: {}}}"),
              "types.yaml: event_types.lower: an event type is PascalCase letters and digits, e.g. MissionCompleted");
    EXPECT_EQ(error_of("types: {}"), "types.yaml: must be a map with one key, event_types");
    const std::string syntax = error_of("event_types: {A: [");
    EXPECT_EQ(syntax.rfind("types.yaml: not valid YAML: ", 0), 0u) << syntax;
    EXPECT_EQ(syntax.find('\n'), std::string::npos);
}

TEST_F(Registry, CommandLineAppliesListsAndRefusesBadFilesWithExitTwo) {
    TempDir dir;
    const auto write = [&](const std::string& name, const std::string& text) {
        const auto path = (dir.path() / name).string();
        std::ofstream(path) << text;
        return path;
    };
    const std::string good = write("types.yaml", kCaseTypes);
    auto [code, out] = run_command({OUTBOXD_BINARY, "event-types", "apply", good}, env());
    EXPECT_EQ(code, 0) << out;
    EXPECT_NE(out.find("added     CaseChecked (version 1)"), std::string::npos) << out;
    std::tie(code, out) = run_command({OUTBOXD_BINARY, "event-types", "apply", good}, env());
    EXPECT_EQ(code, 0) << out;
    EXPECT_NE(out.find("unchanged CaseChecked (version 1)"), std::string::npos) << out;

    std::tie(code, out) = run_command({OUTBOXD_BINARY, "event-types", "list", "--format", "json"}, env());
    ASSERT_EQ(code, 0) << out;
    const json listed = json::parse(out);
    EXPECT_EQ(listed["event_types"]["CaseChecked"]["version"], 1);
    const json fields = listed["event_types"]["CaseChecked"]["fields"];
    EXPECT_TRUE(sdk::registry_mismatches(sdk::schema_from_registry(fields), fields).empty());
    const sdk::PayloadSchema drifted{{"s", sdk::FieldKind::String, 41},
                                     {"id", sdk::FieldKind::Uuid},
                                     {"i", sdk::FieldKind::Number},
                                     {"extra", sdk::FieldKind::Boolean}};
    EXPECT_EQ(sdk::registry_mismatches(drifted, fields),
              (std::vector<std::string>{"field 's' allows 41 bytes here but 40 in the registry",
                                        "field 'i' is Number here but Integer in the registry",
                                        "field 'extra' is not registered"}));

    const std::string bad = write("bad.yaml", "event_types:\n  A: {fields: {x: {type: text}}}\n");
    std::tie(code, out) = run_command({OUTBOXD_BINARY, "event-types", "apply", bad}, env());
    EXPECT_EQ(code, 2) << out;
    EXPECT_EQ(out, "outboxd event-types apply: " + bad +
                       ": event_types.A.fields.x.type: 'text' is not one of string, integer, number, boolean\n");
    const std::string broken = write("broken.yaml", "event_types: {A: [\n");
    std::tie(code, out) = run_command({OUTBOXD_BINARY, "event-types", "apply", broken}, env());
    EXPECT_EQ(code, 2) << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
    EXPECT_EQ(count("SELECT count(*) FROM outbox_event_type"), 1) << "a bad file changes nothing";
    // Applications do not read outboxd's configuration: migrate and apply store the setting.
    auto with_flag = env();
    with_flag["OUTBOX_REQUIRE_REGISTERED_TYPES"] = "true";
    std::tie(code, out) = run_command({OUTBOXD_BINARY, "migrate"}, with_flag);
    EXPECT_EQ(code, 0) << out;
    EXPECT_NE(out.find("outbox.require_registered_types is now true (was false"), std::string::npos) << out;
    EXPECT_EQ(db_.scalar("SELECT value::text FROM outbox_setting WHERE name = 'require_registered_types'"), "true");
    // A routine command whose configuration says false (the default) never switches it off.
    auto configured_off = env();
    configured_off["OUTBOX_REQUIRE_REGISTERED_TYPES"] = "false";
    std::tie(code, out) = run_command({OUTBOXD_BINARY, "event-types", "apply", good}, configured_off);
    EXPECT_EQ(code, 0) << out;
    EXPECT_EQ(out.find("require_registered_types"), std::string::npos) << out;
    std::tie(code, out) = run_command({OUTBOXD_BINARY, "migrate"}, env());
    EXPECT_EQ(code, 0) << out;
    EXPECT_EQ(db_.scalar("SELECT value::text FROM outbox_setting WHERE name = 'require_registered_types'"), "true")
        << "migrate without the flag leaves the setting as it is: " << out;
    std::tie(code, out) = run_command({OUTBOXD_BINARY, "status"}, env());
    EXPECT_EQ(code, 0) << out;
    EXPECT_NE(out.find("require_registered_types: true"), std::string::npos) << out;
    EXPECT_EQ(count("SELECT count(*) FROM audit_event WHERE action = 'outbox.setting_changed'"), 1);
    // Only the explicit flag switches it off, and the change is audited with both values.
    std::tie(code, out) =
        run_command({OUTBOXD_BINARY, "event-types", "apply", "--require-registered-types=false", good}, env());
    EXPECT_EQ(code, 0) << out;
    EXPECT_NE(out.find("outbox.require_registered_types is now false (was true"), std::string::npos) << out;
    EXPECT_EQ(db_.scalar("SELECT value::text FROM outbox_setting WHERE name = 'require_registered_types'"), "false");
    EXPECT_EQ(db_.scalar("SELECT actor LIKE 'cli:%' AND detail->>'old' = 'true' AND detail->>'new' = 'false' "
                         "FROM audit_event WHERE action = 'outbox.setting_changed' ORDER BY id DESC LIMIT 1"),
              "t");
    std::tie(code, out) = run_command({OUTBOXD_BINARY, "migrate", "--require-registered-types=maybe"}, env());
    EXPECT_EQ(code, 2) << out;
}

TEST_F(Registry, TheExamplesRegistryFileApplies) {
    pqxx::connection conn(db_.url());
    const auto result = registry::apply_registry(
        conn, registry::read_registry_file(std::string(OUTBOX_SOURCE_DIR) + "/examples/event-types.yaml"), false,
        "cli:test");
    ASSERT_EQ(result.types.size(), 2u);
    pqxx::work tx(conn);
    EXPECT_NO_THROW(tx.exec(
        "SELECT outbox_publish('acme', 'MissionCompleted', "
        "'{\"completion_id\": 123, \"user_id\": 1, \"mission_id\": 7, \"solar_term\": \"CHUNBUN\"}'::jsonb)"));
    EXPECT_NO_THROW(tx.exec(
        "SELECT outbox_publish('acme', 'WebsiteRegistered', "
        "'{\"website_id\": \"550e8400-e29b-41d4-a716-446655440000\", \"domain\": \"example.com\"}'::jsonb)"));
    tx.commit();
}

}  // namespace
}  // namespace outbox::test
