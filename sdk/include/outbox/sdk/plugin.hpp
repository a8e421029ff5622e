#pragma once
// OUTBOX_PLUGIN(HandlerClass, "handler-name"): put it once, at namespace scope, in one .cpp
// of a plugin (a trailing semicolon is optional).
//
// It exports exactly two symbols:
//   outbox_plugin_manifest  plain C data (see abi.hpp), read by the host before anything else;
//   outbox_create_handler   a pointer to the factory, laid out like a Boost.DLL alias
//                           (boost::dll::shared_library::get_alias reads it), so plugins
//                           need no Boost headers.
//
// The name goes into the manifest, so the host knows which `handlers.<name>.config`
// section to construct the handler with before constructing it, and constructs it exactly
// once. handler_name() must return the same name, or the host refuses the file. The
// one-argument OUTBOX_PLUGIN(HandlerClass) still compiles and loads; the host then finds
// the section by the file's name (see docs/plugins.md).
//
// The factory accepts exactly two constructors, checked at compile time:
//   explicit HandlerClass(const std::string& config_json)  -- the section as JSON text, or
//   HandlerClass()                                          -- a handler without config.
// Any other way to make a HandlerClass from a std::string (a constructor taking
// nlohmann::json or std::string_view) is refused, so a handler never silently receives
// the config as a JSON string value. A constructor that throws makes the host reject the file.

#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "outbox/sdk/abi.hpp"
#include "outbox/sdk/handler.hpp"

namespace outbox::sdk::detail {

using HandlerFactory = std::unique_ptr<Handler>(const std::string& config_json);

/// Converts to `const std::string&` and to nothing else. A class is constructible from it
/// only through a constructor that takes a std::string itself: a second user-defined
/// conversion (string -> nlohmann::json, string -> string_view) is not allowed.
struct ConfigText {
    const std::string& text;
    operator const std::string&() const noexcept { return text; }  // NOLINT: implicit on purpose
};

/// Converts to `const nlohmann::json&` only; never used at run time. A handler that can be
/// made from it has a constructor taking nlohmann::json, which would otherwise be handed
/// the config text as a JSON string value.
struct JsonValue {
    operator const nlohmann::json&() const noexcept;  // NOLINT: declared only, for the check
};

template <class HandlerClass>
inline constexpr bool takes_config_text =
    std::is_constructible_v<HandlerClass, ConfigText> && !std::is_constructible_v<HandlerClass, JsonValue>;

template <class HandlerClass>
std::unique_ptr<Handler> construct_handler(const std::string& config_json) {
    static_assert(std::is_base_of_v<Handler, HandlerClass>,
                  "OUTBOX_PLUGIN needs a class derived from outbox::sdk::Handler");
    if constexpr (takes_config_text<HandlerClass>) {
        return std::make_unique<HandlerClass>(static_cast<const std::string&>(ConfigText{config_json}));
    } else if constexpr (std::is_constructible_v<HandlerClass, const std::string&> ||
                         std::is_constructible_v<HandlerClass, JsonValue>) {
        static_assert(sizeof(HandlerClass) == 0,
                      "OUTBOX_PLUGIN: this handler has a constructor taking nlohmann::json (or std::string_view, ...), "
                      "which would receive the config as a JSON string value; the factory accepts exactly "
                      "`explicit HandlerClass(const std::string& config_json)` (parse the text with "
                      "nlohmann::json::parse) or a default constructor");
        return nullptr;
    } else {
        static_assert(std::is_default_constructible_v<HandlerClass>,
                      "OUTBOX_PLUGIN: a handler needs `explicit HandlerClass(const std::string& config_json)` or a "
                      "default constructor");
        return std::make_unique<HandlerClass>();
    }
}

/// ^[a-z0-9][a-z0-9._-]{0,99}$, the rule the host applies to handler_name().
constexpr bool valid_handler_name(const char* name, std::size_t size) {
    if (size == 0 || size > OUTBOX_HANDLER_NAME_MAX) return false;
    for (std::size_t i = 0; i < size; ++i) {
        const char c = name[i];
        const bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-'))) return false;
    }
    return true;
}

}  // namespace outbox::sdk::detail

// The manifest and factory; NAME_LITERAL is "" for the one-argument form. The macro ends
// with a complete declaration, so a semicolon after OUTBOX_PLUGIN(...) is an empty
// declaration and may be written or left out.
#define OUTBOX_PLUGIN_DEFINE_(HandlerClass, NAME_LITERAL)                                        \
    extern "C" __attribute__((visibility("default"))) const outbox_plugin_manifest_t            \
        outbox_plugin_manifest = {OUTBOX_MANIFEST_MAGIC,                                         \
                                  sizeof(outbox_plugin_manifest_t),                              \
                                  OUTBOX_ABI_KIND,                                               \
                                  OUTBOX_ABI_MAJOR,                                              \
                                  OUTBOX_ABI_MINOR,                                              \
                                  OUTBOX_SDK_VERSION,                                            \
                                  OUTBOX_STDLIB_ABI,                                             \
                                  NAME_LITERAL};                                                 \
    extern "C" __attribute__((visibility("default")))                                           \
    ::outbox::sdk::detail::HandlerFactory* const outbox_create_handler =                         \
        &::outbox::sdk::detail::construct_handler<HandlerClass>;

#define OUTBOX_PLUGIN_1_(HandlerClass) OUTBOX_PLUGIN_DEFINE_(HandlerClass, "")
#define OUTBOX_PLUGIN_2_(HandlerClass, HandlerName)                                              \
    static_assert(::outbox::sdk::detail::valid_handler_name("" HandlerName, sizeof(HandlerName) - 1), \
                  "OUTBOX_PLUGIN(Class, \"name\"): the name must be a string literal of 1-100 characters "   \
                  "a-z, 0-9, '.', '_', '-', starting with a letter or digit");                  \
    OUTBOX_PLUGIN_DEFINE_(HandlerClass, HandlerName)
#define OUTBOX_PLUGIN_PICK_(_1, _2, NAME, ...) NAME

/// OUTBOX_PLUGIN(HandlerClass, "handler-name"), or OUTBOX_PLUGIN(HandlerClass) without a name
/// in the manifest (SDK 1.0 style).
#define OUTBOX_PLUGIN(...) OUTBOX_PLUGIN_PICK_(__VA_ARGS__, OUTBOX_PLUGIN_2_, OUTBOX_PLUGIN_1_, unused)(__VA_ARGS__)
