#pragma once
// The event-type registry seen from C++: SafePayload schemas built from, or checked against,
// the fields a type is registered with (`outboxd event-types list --format json`, or the
// `fields` column of outbox_event_type), so the C++ and SQL paths apply the same rules.
//
// A registered field maps to one FieldKind; outbox_check_registered_payload() (SQL) applies
// exactly that kind's SafePayload rules:
//   {type: string}                    -> String,     max_length (default 256)
//   {type: string, identifier: true}  -> Identifier, max_length (default 256)
//   {type: integer}                   -> Integer     (identifier: true changes nothing)
//   {type: number}                    -> Number
//   {type: boolean}                   -> Boolean
// Registered fields are optional (the registry has no "required").

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "outbox/sdk/payload.hpp"

namespace outbox::sdk {

inline constexpr std::size_t kDefaultRegisteredMaxLength = 256;

/// The FieldSpec of one registered field (`{"type": ..., "max_length": ..., "identifier": ...}`).
/// Throws std::invalid_argument for a type the registry does not know.
inline FieldSpec field_from_registry(const std::string& name, const nlohmann::json& spec) {
    const std::string type = spec.value("type", "");
    const bool identifier = spec.value("identifier", false);
    FieldSpec field{name, FieldKind::String, spec.value("max_length", kDefaultRegisteredMaxLength), false};
    if (type == "string") {
        field.kind = identifier ? FieldKind::Identifier : FieldKind::String;
    } else if (type == "integer") {
        field.kind = FieldKind::Integer;
    } else if (type == "number") {
        field.kind = FieldKind::Number;
    } else if (type == "boolean") {
        field.kind = FieldKind::Boolean;
    } else {
        throw std::invalid_argument("registered field '" + name + "' has unknown type '" + type + "'");
    }
    return field;
}

/// A schema with exactly the registered fields of one type (`fields` as stored).
inline PayloadSchema schema_from_registry(const nlohmann::json& fields) {
    std::vector<FieldSpec> specs;
    for (const auto& [name, spec] : fields.items()) specs.push_back(field_from_registry(name, spec));
    return PayloadSchema(std::move(specs));
}

/// Where a hand-written schema would let through what the registry refuses: a field the
/// registry does not declare, another kind, or a longer max_length. A Uuid field fits a
/// registered identifier string of max_length 36 or more (the one UUID the identifier rules
/// refuse is one made of decimal digits only, which is phone-shaped). Empty when consistent.
inline std::vector<std::string> registry_mismatches(const PayloadSchema& schema, const nlohmann::json& fields) {
    std::vector<std::string> problems;
    for (const auto& field : schema.fields()) {
        if (!fields.contains(field.name)) {
            problems.push_back("field '" + field.name + "' is not registered");
            continue;
        }
        const FieldSpec registered = field_from_registry(field.name, fields.at(field.name));
        const bool uuid_fits = field.kind == FieldKind::Uuid && registered.kind == FieldKind::Identifier &&
                               registered.max_length >= 36;
        if (field.kind != registered.kind && !uuid_fits) {
            problems.push_back("field '" + field.name + "' is " + detail::kind_name(field.kind) + " here but " +
                               detail::kind_name(registered.kind) + " in the registry");
            continue;
        }
        const bool text = field.kind == FieldKind::String || field.kind == FieldKind::Identifier;
        if (text && field.max_length > registered.max_length) {
            problems.push_back("field '" + field.name + "' allows " + std::to_string(field.max_length) +
                               " bytes here but " + std::to_string(registered.max_length) + " in the registry");
        }
    }
    return problems;
}

}  // namespace outbox::sdk
