// SafePayload driven by fuzz bytes: a schema, then a sequence of set() calls of every value
// kind on declared and undeclared names, then json(). A refusal may only ever be a
// PayloadError; whatever json() returns is a flat object of declared, allow-listed values
// that PostgreSQL can store.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include <fuzzer/FuzzedDataProvider.h>
#include <nlohmann/json.hpp>

#include "fuzz_check.hpp"
#include "outbox/sdk/payload.hpp"

namespace {

using outbox::sdk::FieldKind;
using outbox::sdk::FieldSpec;
using outbox::sdk::kMaxPayloadBytes;
using outbox::sdk::PayloadError;
using outbox::sdk::PayloadSchema;
using outbox::sdk::SafePayload;

const PayloadSchema kSchemas[] = {
    {{"website_id", FieldKind::Uuid},
     {"mission_id", FieldKind::Identifier},
     {"domain", FieldKind::String, 253},
     {"score", FieldKind::Integer, 256, false},
     {"ratio", FieldKind::Number, 256, false},
     {"first_time", FieldKind::Boolean, 256, false},
     {"note", FieldKind::String, 16, false}},
    // Fields allowed to be larger than the whole payload: only the total limit stops them.
    {{"blob", FieldKind::String, 2 * kMaxPayloadBytes, false},
     {"tag", FieldKind::Identifier, 2 * kMaxPayloadBytes, false},
     {"n", FieldKind::Number, 256, false}},
    {{"a", FieldKind::Number, 256, false}, {"b", FieldKind::Number, 256, false}, {"c", FieldKind::Number, 256, false},
     {"d", FieldKind::Number, 256, false}, {"e", FieldKind::Number, 256, false}, {"f", FieldKind::Integer, 256, false},
     {"g", FieldKind::String, 0, false}},
    // A name declared twice: the first declaration wins.
    {{"dup", FieldKind::String}, {"dup", FieldKind::Integer}},
};

std::string pick_name(FuzzedDataProvider& in, const PayloadSchema& schema) {
    const auto& fields = schema.fields();
    const std::size_t choice = in.ConsumeIntegralInRange<std::size_t>(0, fields.size());
    if (choice < fields.size()) return fields[choice].name;
    return in.ConsumeRandomLengthString(40);  // most likely undeclared
}

void apply_one(FuzzedDataProvider& in, SafePayload& payload, const PayloadSchema& schema) {
    const std::string name = pick_name(in, schema);
    switch (in.ConsumeIntegralInRange(0, 5)) {
        case 0: payload.set(name, in.ConsumeRandomLengthString(2 * kMaxPayloadBytes + 16)); break;
        case 1: payload.set(name, in.ConsumeIntegral<std::int64_t>()); break;
        case 2: payload.set(name, in.ConsumeIntegral<std::uint64_t>()); break;
        case 3: {
            // Raw bits reach NaN, infinities and subnormals, which ConsumeFloatingPoint avoids.
            const auto bits = in.ConsumeIntegral<std::uint64_t>();
            double value = 0;
            std::memcpy(&value, &bits, sizeof value);
            payload.set(name, value);
            break;
        }
        case 4: payload.set(name, in.ConsumeBool()); break;
        default: payload.set(name, in.ConsumeProbability<double>() * 1e6); break;
    }
}

void check_accepted(const std::string& text, const PayloadSchema& schema) {
    OUTBOX_FUZZ_CHECK(text.size() <= kMaxPayloadBytes, "the compact text is within the limit");
    const auto parsed = nlohmann::json::parse(text, nullptr, false);
    OUTBOX_FUZZ_CHECK(!parsed.is_discarded(), "json() returns valid JSON (so valid UTF-8)");
    OUTBOX_FUZZ_CHECK(parsed.is_object(), "the payload is an object");
    for (const auto& field : schema.fields()) {
        if (field.required) OUTBOX_FUZZ_CHECK(parsed.contains(field.name), "required fields are present");
    }
    for (const auto& [key, value] : parsed.items()) {
        const FieldSpec* spec = schema.find(key);
        OUTBOX_FUZZ_CHECK(spec != nullptr, "only declared fields");
        OUTBOX_FUZZ_CHECK(!value.is_object() && !value.is_array() && !value.is_null(), "only scalar values");
        switch (spec->kind) {
            case FieldKind::Uuid:
                OUTBOX_FUZZ_CHECK(value.is_string() && outbox::sdk::detail::looks_like_uuid(value.get<std::string>()),
                                  "Uuid fields hold UUIDs");
                break;
            case FieldKind::Identifier:
            case FieldKind::String: {
                OUTBOX_FUZZ_CHECK(value.is_string(), "text fields hold strings");
                const auto s = value.get<std::string>();
                OUTBOX_FUZZ_CHECK(s.find('\0') == std::string::npos, "no NUL: jsonb cannot store it");
                OUTBOX_FUZZ_CHECK(!s.empty() && s.size() <= spec->max_length, "text within its declared length");
                OUTBOX_FUZZ_CHECK(!outbox::sdk::detail::looks_like_jwt(s), "no JWTs");
                if (spec->kind == FieldKind::String) {
                    OUTBOX_FUZZ_CHECK(!outbox::sdk::detail::looks_like_email(s), "no e-mail addresses");
                    OUTBOX_FUZZ_CHECK(outbox::sdk::detail::longest_digit_run(s, true) < 9, "no phone numbers");
                } else {
                    OUTBOX_FUZZ_CHECK(outbox::sdk::detail::longest_digit_run(s, false) < 13, "no long digit runs");
                }
                break;
            }
            case FieldKind::Integer: OUTBOX_FUZZ_CHECK(value.is_number_integer(), "Integer fields hold integers"); break;
            case FieldKind::Number:
                OUTBOX_FUZZ_CHECK(value.is_number() && std::isfinite(value.get<double>()), "finite numbers");
                break;
            case FieldKind::Boolean: OUTBOX_FUZZ_CHECK(value.is_boolean(), "Boolean fields hold booleans"); break;
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    FuzzedDataProvider in(data, size);
    const PayloadSchema& schema = kSchemas[in.ConsumeIntegralInRange<std::size_t>(0, std::size(kSchemas) - 1)];
    SafePayload payload(schema);
    const int operations = in.ConsumeIntegralInRange(0, 40);
    for (int i = 0; i < operations && in.remaining_bytes() > 0; ++i) {
        try {
            apply_one(in, payload, schema);
        } catch (const PayloadError& e) {
            OUTBOX_FUZZ_CHECK(std::strncmp(e.what(), "payload field '", 15) == 0, "errors name the field");
        }
    }
    try {
        check_accepted(payload.json(), schema);
    } catch (const PayloadError&) {
        // refused: the only allowed way to refuse
    }
    return 0;
}
