#pragma once
// SafePayload: the only way the C++ publisher API builds an event payload.
//
// Payloads are stored in event_publication and read by operators, so they must carry
// identifiers, not personal data. A PayloadSchema declares each allowed field and its
// kind; SafePayload refuses undeclared fields, wrong kinds, oversize strings, and string
// values shaped like e-mail addresses, phone numbers, JWTs or long digit runs. Values are
// scalars only, so the result is always a flat JSON object. Error messages name the field
// and the rule, never the value.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

namespace outbox::sdk {

/// Largest payload accepted, in bytes of the text PostgreSQL stores (`payload::text`, which
/// writes `": "` and `", "` between fields and numbers without an exponent); outbox_publish()
/// enforces the same.
inline constexpr std::size_t kMaxPayloadBytes = 8192;

enum class FieldKind {
    Uuid,        ///< canonical 8-4-4-4-12 hex UUID text
    Identifier,  ///< [A-Za-z0-9_.:-]+, e.g. "mission-42" or "SUMMER_SOLSTICE"; no run of 13+ digits, not phone-shaped
    String,      ///< short free text; rejected when shaped like PII (e-mail, phone, JWT, 9+ digits)
    Integer,     ///< signed 64-bit integer, e.g. a numeric id (a Java Long). The digit-run rule of
                 ///< String and Identifier does not apply: a long id is exactly what this kind is for,
                 ///< and declaring a field Integer is the decision that its values are not personal
                 ///< data. Never declare a phone or account number as a field of any kind.
    Number,      ///< finite double
    Boolean,
};

struct FieldSpec {
    std::string name;
    FieldKind kind = FieldKind::String;
    std::size_t max_length = 256;  ///< for Identifier and String values, in bytes
    bool required = true;
};

/// Thrown by SafePayload. field() names the offending field; what() names the rule.
class PayloadError : public std::invalid_argument {
public:
    PayloadError(std::string field, const std::string& rule)
        : std::invalid_argument("payload field '" + field + "': " + rule), field_(std::move(field)) {}
    [[nodiscard]] const std::string& field() const noexcept { return field_; }

private:
    std::string field_;
};

/// Thrown when free text such as an aggregate_key is shaped like personal data. what() is
/// "<field>: <rule>" and never contains the value.
class FreeTextError : public std::invalid_argument {
public:
    FreeTextError(std::string field, const std::string& rule)
        : std::invalid_argument(field + ": " + rule), field_(std::move(field)) {}
    [[nodiscard]] const std::string& field() const noexcept { return field_; }

private:
    std::string field_;
};

namespace detail {

inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
inline bool is_b64url(char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || is_digit(c) || c == '-' || c == '_';
}

inline bool looks_like_uuid(std::string_view s) {
    if (s.size() != 36) return false;
    for (std::size_t i = 0; i < s.size(); ++i) {
        const char c = s[i];
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (c != '-') return false;
        } else if (!(is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) {
            return false;
        }
    }
    return true;
}

inline bool looks_like_email(std::string_view s) {
    for (std::size_t at = s.find('@'); at != std::string_view::npos; at = s.find('@', at + 1)) {
        if (at == 0 || s[at - 1] == ' ') continue;
        const auto end = s.find_first_of(" \t\n", at);
        const auto domain = s.substr(at + 1, end == std::string_view::npos ? std::string_view::npos : end - at - 1);
        const auto dot = domain.find('.');
        if (dot != std::string_view::npos && dot > 0 && dot + 1 < domain.size()) return true;
    }
    return false;
}

/// Three or more dot-separated, non-empty base64url segments, the first starting with "eyJ",
/// whatever follows them (a dot, a quote, a bracket, the end of the text).
inline bool looks_like_jwt(std::string_view s) {
    for (std::size_t pos = s.find("eyJ"); pos != std::string_view::npos; pos = s.find("eyJ", pos + 1)) {
        int segments = 0;
        std::size_t segment = 0;
        for (std::size_t i = pos; i < s.size(); ++i) {
            if (s[i] == '.') {
                if (segment == 0) break;
                ++segments;
                segment = 0;
            } else if (is_b64url(s[i])) {
                ++segment;
            } else {
                break;
            }
        }
        if (segment > 0) ++segments;
        if (segments >= 3) return true;
    }
    return false;
}

/// The zero of every run of ten Unicode decimal digits (category Nd, Unicode 15) outside ASCII.
inline constexpr char32_t kDigitZeros[] = {
    0x660,   0x6F0,   0x7C0,   0x966,   0x9E6,   0xA66,   0xAE6,   0xB66,   0xBE6,   0xC66,   0xCE6,   0xD66,
    0xDE6,   0xE50,   0xED0,   0xF20,   0x1040,  0x1090,  0x17E0,  0x1810,  0x1946,  0x19D0,  0x1A80,  0x1A90,
    0x1B50,  0x1BB0,  0x1C40,  0x1C50,  0xA620,  0xA8D0,  0xA900,  0xA9D0,  0xA9F0,  0xAA50,  0xABF0,  0xFF10,
    0x104A0, 0x10D30, 0x11066, 0x110F0, 0x11136, 0x111D0, 0x112F0, 0x11450, 0x114D0, 0x11650, 0x116C0, 0x11730,
    0x118E0, 0x11950, 0x11C50, 0x11D50, 0x11DA0, 0x11F50, 0x16A60, 0x16AC0, 0x16B50, 0x1D7CE, 0x1D7D8, 0x1D7E2,
    0x1D7EC, 0x1D7F6, 0x1E140, 0x1E2F0, 0x1E4F0, 0x1E950, 0x1FBF0,
};

/// The text the free-text rules read: every Unicode decimal digit becomes its ASCII digit
/// and the fullwidth and small commercial at (U+FF20, U+FE6B) become '@', so look-alikes
/// cannot slip past the e-mail, phone and digit-run rules. Bytes that are not UTF-8 are
/// kept. outbox_fold_free_text() in SQL folds the same characters.
inline std::string fold_look_alikes(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size();) {
        const auto lead = static_cast<unsigned char>(s[i]);
        const std::size_t length = lead >= 0xC2 && lead <= 0xDF   ? 2
                                   : lead >= 0xE0 && lead <= 0xEF ? 3
                                   : lead >= 0xF0 && lead <= 0xF4 ? 4
                                                                  : 1;
        char32_t cp = lead & (length == 2 ? 0x1F : length == 3 ? 0x0F : 0x07);
        bool decoded = length > 1 && i + length <= s.size();
        for (std::size_t k = 1; decoded && k < length; ++k) {
            const auto next = static_cast<unsigned char>(s[i + k]);
            decoded = (next & 0xC0) == 0x80;
            cp = (cp << 6) | (next & 0x3F);
        }
        if (!decoded) {
            out += s[i++];
            continue;
        }
        char folded = (cp == 0xFF20 || cp == 0xFE6B) ? '@' : '\0';
        for (const char32_t zero : kDigitZeros) {
            if (cp >= zero && cp <= zero + 9) folded = static_cast<char>('0' + (cp - zero));
        }
        if (folded != '\0') {
            out += folded;
        } else {
            out.append(s.substr(i, length));
        }
        i += length;
    }
    return out;
}

/// Longest run of digits, counting only digits but letting phone separators
/// (space, +, -, ., (, )) continue the run when `through_separators`.
inline std::size_t longest_digit_run(std::string_view s, bool through_separators) {
    std::size_t best = 0;
    std::size_t run = 0;
    for (const char c : s) {
        if (is_digit(c)) {
            best = std::max(best, ++run);
        } else if (!(through_separators && (c == ' ' || c == '+' || c == '-' || c == '.' || c == '(' || c == ')'))) {
            run = 0;
        }
    }
    return best;
}

/// Only digits and phone separators, at least one separator and 9+ digits: "010-1234-5678".
/// Plain digit runs are left to the digit-run rule so numeric ids stay usable.
inline bool looks_like_phone(std::string_view s) {
    std::size_t digits = 0;
    bool separated = false;
    for (const char c : s) {
        if (is_digit(c)) {
            ++digits;
        } else if (c == ' ' || c == '+' || c == '-' || c == '.' || c == '(' || c == ')') {
            separated = true;
        } else {
            return false;
        }
    }
    return separated && digits >= 9;
}

/// The rule free text that operators read (an aggregate_key) breaks, or nullptr. The same
/// detectors as the payload rules: e-mail, JWT, phone-shaped, and a run of 13+ digits inside
/// other text; a value of digits only is a numeric id (as Integer fields are) and passes.
/// The rules read the text with look-alikes folded (fold_look_alikes()).
/// outbox_check_free_text() in SQL implements the same rules in the same order.
inline const char* free_text_rule(std::string_view text) {
    const std::string folded = fold_look_alikes(text);
    const std::string_view s = folded;
    if (looks_like_email(s)) return "value is shaped like an e-mail address";
    if (looks_like_jwt(s)) return "value is shaped like a JWT";
    if (looks_like_phone(s)) return "value is shaped like a phone number";
    const bool only_digits = !s.empty() && std::all_of(s.begin(), s.end(), is_digit);
    if (!only_digits && longest_digit_run(s, false) >= 13) return "value contains a run of 13 or more digits";
    return nullptr;
}

/// Well-formed UTF-8 (no overlong forms, no surrogates), as PostgreSQL requires.
inline bool valid_utf8(std::string_view s) {
    for (std::size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c < 0x80) {
            ++i;
            continue;
        }
        std::size_t length = 0;
        unsigned char low = 0x80, high = 0xBF;  // the second byte's range: no overlongs or surrogates
        if (c >= 0xC2 && c <= 0xDF) {
            length = 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            length = 3;
            if (c == 0xE0) low = 0xA0;
            if (c == 0xED) high = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            length = 4;
            if (c == 0xF0) low = 0x90;
            if (c == 0xF4) high = 0x8F;
        } else {
            return false;
        }
        if (i + length > s.size()) return false;
        for (std::size_t k = 1; k < length; ++k) {
            const auto next = static_cast<unsigned char>(s[i + k]);
            if (next < (k == 1 ? low : 0x80) || next > (k == 1 ? high : 0xBF)) return false;
        }
        i += length;
    }
    return true;
}

/// Length of a JSON number as PostgreSQL's jsonb prints it: plain decimal, so "1e+300" is
/// 301 digits and "5e-324" is "0." and 324 digits.
inline std::size_t plain_decimal_length(std::string_view number) {
    std::size_t length = 0;
    if (!number.empty() && number.front() == '-') {
        ++length;
        number.remove_prefix(1);
    }
    long long exponent = 0;
    const auto e = number.find_first_of("eE");
    if (e != std::string_view::npos) {
        exponent = std::stoll(std::string(number.substr(e + 1)));
        number = number.substr(0, e);
    }
    const auto dot = number.find('.');
    const auto int_digits = static_cast<long long>(number.substr(0, dot).size());
    const auto frac_digits = dot == std::string_view::npos ? 0LL : static_cast<long long>(number.size() - dot - 1);
    const long long shown_int = std::max(1LL, int_digits + exponent);
    const long long shown_frac = std::max(0LL, frac_digits - exponent);
    return length + static_cast<std::size_t>(shown_int + (shown_frac > 0 ? 1 + shown_frac : 0));
}

/// Bytes of a flat object as outbox_publish() measures it (`payload::text`).
inline std::size_t stored_size(const nlohmann::json& object) {
    std::size_t size = 2;
    bool first = true;
    for (const auto& [key, value] : object.items()) {
        size += (first ? 0 : 2) + nlohmann::json(key).dump().size() + 2;
        size += value.is_number_float() ? plain_decimal_length(value.dump()) : value.dump().size();
        first = false;
    }
    return size;
}

inline const char* kind_name(FieldKind kind) {
    switch (kind) {
        case FieldKind::Uuid: return "Uuid";
        case FieldKind::Identifier: return "Identifier";
        case FieldKind::String: return "String";
        case FieldKind::Integer: return "Integer";
        case FieldKind::Number: return "Number";
        case FieldKind::Boolean: return "Boolean";
    }
    return "?";
}

}  // namespace detail

/// The rule short free text breaks when it is shaped like personal data or a secret (an
/// e-mail address, a JWT, a phone number or a run of 9+ digits, separators allowed), or
/// nullptr. SafePayload's String fields and the host's operator free text (a manual
/// retry's reason) share these detectors. (Identifier-like text such as an aggregate_key
/// follows detail::free_text_rule.) Look-alike digits and '@' are folded first
/// (detail::fold_look_alikes). The rule names the shape, never the value.
inline const char* string_field_rule(std::string_view raw) {
    const std::string folded = detail::fold_look_alikes(raw);
    const std::string_view text = folded;
    if (detail::looks_like_email(text)) return "value is shaped like an e-mail address";
    if (detail::looks_like_jwt(text)) return "value is shaped like a JWT";
    if (detail::longest_digit_run(text, true) >= 9) return "value is shaped like a phone number or long digit run";
    return nullptr;
}

/// The allow-list of one event type's payload fields.
class PayloadSchema {
public:
    PayloadSchema(std::initializer_list<FieldSpec> fields) : fields_(fields) {}
    explicit PayloadSchema(std::vector<FieldSpec> fields) : fields_(std::move(fields)) {}

    [[nodiscard]] const FieldSpec* find(std::string_view name) const {
        for (const auto& field : fields_) {
            if (field.name == name) return &field;
        }
        return nullptr;
    }
    [[nodiscard]] const std::vector<FieldSpec>& fields() const noexcept { return fields_; }

private:
    std::vector<FieldSpec> fields_;
};

/// A payload under construction. set() validates each value as it is added and throws
/// PayloadError on the first violation; json() checks required fields and total size.
/// Not thread-safe; cheap to copy.
class SafePayload {
public:
    explicit SafePayload(const PayloadSchema& schema) : schema_(&schema), values_(nlohmann::json::object()) {}

    SafePayload& set(std::string_view name, std::string_view value) {
        const FieldSpec& spec = declared(name);
        switch (spec.kind) {
            case FieldKind::Uuid:
                if (!detail::looks_like_uuid(value)) throw PayloadError(spec.name, "is declared Uuid but is not a UUID");
                break;
            case FieldKind::Identifier:
                check_length(spec, value);
                for (const char c : value) {
                    if (!(detail::is_b64url(c) || c == '.' || c == ':')) {
                        throw PayloadError(spec.name, "an Identifier may only contain letters, digits and _ . : -");
                    }
                }
                if (detail::looks_like_jwt(value)) throw PayloadError(spec.name, "value is shaped like a JWT");
                if (detail::looks_like_phone(value)) throw PayloadError(spec.name, "value is shaped like a phone number");
                if (detail::longest_digit_run(value, false) >= 13) {
                    throw PayloadError(spec.name, "value contains a run of 13 or more digits");
                }
                break;
            case FieldKind::String:
                check_length(spec, value);
                if (!detail::valid_utf8(value)) throw PayloadError(spec.name, "is not valid UTF-8");
                // jsonb cannot store U+0000.
                if (value.find('\0') != std::string_view::npos) throw PayloadError(spec.name, "contains a NUL character");
                if (const char* rule = string_field_rule(value)) throw PayloadError(spec.name, rule);
                break;
            default:
                throw PayloadError(spec.name, std::string("is declared ") + detail::kind_name(spec.kind) + ", not text");
        }
        values_[spec.name] = std::string(value);
        return *this;
    }
    SafePayload& set(std::string_view name, const char* value) { return set(name, std::string_view(value)); }
    SafePayload& set(std::string_view name, const std::string& value) { return set(name, std::string_view(value)); }

    SafePayload& set(std::string_view name, bool value) {
        const FieldSpec& spec = declared(name);
        expect_kind(spec, FieldKind::Boolean);
        values_[spec.name] = value;
        return *this;
    }

    template <class T>
        requires(std::is_integral_v<T> && !std::is_same_v<T, bool>)
    SafePayload& set(std::string_view name, T value) {
        const FieldSpec& spec = declared(name);
        expect_kind(spec, FieldKind::Integer);
        if constexpr (std::is_unsigned_v<T> && sizeof(T) >= sizeof(std::int64_t)) {
            if (value > static_cast<T>(INT64_MAX)) throw PayloadError(spec.name, "integer does not fit in 64 bits");
        }
        values_[spec.name] = static_cast<std::int64_t>(value);
        return *this;
    }

    SafePayload& set(std::string_view name, double value) {
        const FieldSpec& spec = declared(name);
        expect_kind(spec, FieldKind::Number);
        if (!(value == value) || value > 1.7976931348623157e308 || value < -1.7976931348623157e308) {
            throw PayloadError(spec.name, "number is not finite");
        }
        values_[spec.name] = value;
        return *this;
    }

    /// The payload as compact JSON text. Throws PayloadError when a required field is
    /// missing or the payload, as PostgreSQL stores it, is larger than kMaxPayloadBytes.
    [[nodiscard]] std::string json() const {
        for (const auto& field : schema_->fields()) {
            if (field.required && !values_.contains(field.name)) throw PayloadError(field.name, "is required but not set");
        }
        std::string text = values_.dump();
        if (detail::stored_size(values_) > kMaxPayloadBytes) {
            throw PayloadError("*", "payload is larger than " + std::to_string(kMaxPayloadBytes) + " bytes");
        }
        return text;
    }

private:
    const FieldSpec& declared(std::string_view name) const {
        const FieldSpec* spec = schema_->find(name);
        if (spec == nullptr) throw PayloadError(std::string(name), "is not declared in the payload schema");
        return *spec;
    }
    static void expect_kind(const FieldSpec& spec, FieldKind kind) {
        if (spec.kind != kind) {
            throw PayloadError(spec.name, std::string("is declared ") + detail::kind_name(spec.kind) + ", got " +
                                              detail::kind_name(kind));
        }
    }
    static void check_length(const FieldSpec& spec, std::string_view value) {
        if (value.empty()) throw PayloadError(spec.name, "is empty");
        if (value.size() > spec.max_length) {
            throw PayloadError(spec.name, "is longer than " + std::to_string(spec.max_length) + " bytes");
        }
    }

    const PayloadSchema* schema_;
    nlohmann::json values_;
};

}  // namespace outbox::sdk
