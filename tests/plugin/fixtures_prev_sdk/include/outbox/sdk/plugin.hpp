#pragma once
// OUTBOX_PLUGIN(HandlerClass): put it once, at namespace scope, in one .cpp of a plugin.
//
// It exports exactly two symbols:
//   outbox_plugin_manifest  plain C data (see abi.hpp), read by the host before anything else;
//   outbox_create_handler   a pointer to the factory, laid out like a Boost.DLL alias
//                           (boost::dll::shared_library::get_alias reads it), so plugins
//                           need no Boost headers.
// The factory constructs HandlerClass from the plugin's config JSON when it has an
// `explicit HandlerClass(const std::string& config_json)` constructor, otherwise with its
// default constructor. A constructor that throws makes the host reject the file.

#include <memory>
#include <string>
#include <type_traits>

#include "outbox/sdk/abi.hpp"
#include "outbox/sdk/handler.hpp"

namespace outbox::sdk::detail {

using HandlerFactory = std::unique_ptr<Handler>(const std::string& config_json);

template <class HandlerClass>
std::unique_ptr<Handler> construct_handler(const std::string& config_json) {
    static_assert(std::is_base_of_v<Handler, HandlerClass>, "OUTBOX_PLUGIN needs a class derived from outbox::sdk::Handler");
    if constexpr (std::is_constructible_v<HandlerClass, const std::string&>) {
        return std::make_unique<HandlerClass>(config_json);
    } else {
        static_assert(std::is_default_constructible_v<HandlerClass>,
                      "a handler needs HandlerClass(const std::string& config_json) or a default constructor");
        return std::make_unique<HandlerClass>();
    }
}

}  // namespace outbox::sdk::detail

#define OUTBOX_PLUGIN(HandlerClass)                                                              \
    extern "C" __attribute__((visibility("default"))) const outbox_plugin_manifest_t            \
        outbox_plugin_manifest = {OUTBOX_MANIFEST_MAGIC,                                         \
                                  sizeof(outbox_plugin_manifest_t),                              \
                                  OUTBOX_ABI_KIND,                                               \
                                  OUTBOX_ABI_MAJOR,                                              \
                                  OUTBOX_ABI_MINOR,                                              \
                                  OUTBOX_SDK_VERSION,                                            \
                                  OUTBOX_STDLIB_ABI};                                            \
    extern "C" __attribute__((visibility("default")))                                           \
    ::outbox::sdk::detail::HandlerFactory* const outbox_create_handler =                         \
        &::outbox::sdk::detail::construct_handler<HandlerClass>
