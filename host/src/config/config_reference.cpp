// The configuration reference: the settings table as Markdown, for docs/operations.md.
#include "config/config.hpp"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/settings_table.hpp"
#include "config/value_parsers.hpp"

namespace outbox::config {
namespace {

// What a key accepts, for the reference: the parser's own words. A probe value beyond every
// range (and not a number) makes each parser say what it expects; a parser that takes any
// text says nothing, and `type` (or "text") describes it.
template <class Target, class Apply>
std::string allowed_text(std::string_view key, Apply apply, std::string_view type) {
    if (!type.empty()) return std::string(type);
    constexpr std::string_view kOrigin = "reference";
    Target scratch;
    try {
        apply(scratch, Value{key, Raw{"100000d", std::string(kOrigin)}});
        return "text";
    } catch (const ConfigError& e) {
        std::string text = e.what();
        const std::string marker = "(from " + std::string(kOrigin) + "): ";
        if (const auto at = text.find(marker); at != std::string::npos) text = text.substr(at + marker.size());
        if (text.rfind("expected ", 0) == 0) text = text.substr(9);
        for (const auto& [from, to] : {std::pair<std::string_view, std::string_view>{"an integer from ", "integer, "},
                                       {"a duration from ", "duration, "},
                                       {"a number ", "number, "},
                                       {"true or false", "boolean"}}) {
            if (text.rfind(from, 0) == 0) text = std::string(to) + text.substr(from.size());
        }
        return text;
    }
}

std::string markdown_cell(std::string_view text) {
    std::string cell;
    for (const char c : text) {
        if (c == '|') cell += '\\';
        cell += c;
    }
    return cell;
}

}  // namespace

std::vector<SettingReference> settings_reference() {
    std::vector<SettingReference> rows;
    for (const auto& setting : settings_table()) {
        rows.push_back({std::string(setting.key), std::string(setting.env),
                        allowed_text<Config>(setting.key, setting.apply, setting.type),
                        std::string(setting.default_value), std::string(setting.description)});
    }
    for (const auto& handler_key : handler_keys()) {
        const std::string key = "handlers.<name>." + std::string(handler_key.name);
        std::string type(handler_key.type);
        if (handler_key.apply != nullptr) type = allowed_text<HandlerSettings>(key, handler_key.apply, handler_key.type);
        rows.push_back({key, "", type, std::string(handler_key.default_value), std::string(handler_key.description)});
    }
    for (const auto& tenant_key : tenant_keys()) {
        const std::string key = "tenants.companies.<company_id>." + std::string(tenant_key.name);
        rows.push_back({key, "", allowed_text<TenantSettings>(key, tenant_key.apply, {}),
                        std::string(tenant_key.default_value), std::string(tenant_key.description)});
    }
    rows.push_back({"", std::string(kSecretEnv), "text, at least " + std::to_string(kMinSecretBytes) + " bytes",
                    "(none)", "the HS256 secret of admin tokens; from the environment only, never from the file"});
    return rows;
}

std::string config_reference_markdown() {
    std::string out =
        "| key | variable | accepts | default | meaning |\n"
        "|---|---|---|---|---|\n";
    auto code = [](const std::string& text) { return text.empty() ? std::string("—") : "`" + text + "`"; };
    for (const auto& row : settings_reference()) {
        // A default in parentheses is derived at run time and already formatted.
        const std::string shown_default = row.default_value.empty()        ? std::string("—")
                                          : row.default_value.front() == '(' ? row.default_value
                                                                             : code(row.default_value);
        out += "| " + code(row.key) + " | " + code(row.env) + " | " + markdown_cell(row.type) + " | " +
               markdown_cell(shown_default) + " | " + markdown_cell(row.description.empty() ? "—" : row.description) +
               " |\n";
    }
    return out;
}

}  // namespace outbox::config
