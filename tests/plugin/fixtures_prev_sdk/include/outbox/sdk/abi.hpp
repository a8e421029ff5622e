#pragma once
// The plugin ABI handshake. The host reads `outbox_plugin_manifest` (plain C data) from a
// plugin file before it touches any C++ symbol in it, and refuses the file unless:
//   - abi_kind equals OUTBOX_ABI_KIND,
//   - abi_major equals the host's major,
//   - abi_minor is not newer than the host's minor,
//   - stdlib_abi equals the host's standard-library ABI.
// The first five fields keep their layout in every future ABI major so that any host can
// read them and explain a mismatch.

#include <cstdint>

#define OUTBOX_ABI_KIND "outboxd-cpp-handler"
#define OUTBOX_ABI_MAJOR 1
#define OUTBOX_ABI_MINOR 0
#define OUTBOX_SDK_VERSION "1.0.0"
#define OUTBOX_MANIFEST_MAGIC 0x4F425850u /* "OBXP" */

#define OUTBOX_STRINGIFY_IMPL(x) #x
#define OUTBOX_STRINGIFY(x) OUTBOX_STRINGIFY_IMPL(x)

// The standard library a plugin was compiled against. std::string and exceptions cross the
// boundary, so host and plugin must agree on it.
#if defined(_LIBCPP_VERSION)
#define OUTBOX_STDLIB_ABI "libc++/" OUTBOX_STRINGIFY(_LIBCPP_ABI_VERSION)
#elif defined(__GLIBCXX__)
#if _GLIBCXX_USE_CXX11_ABI
#define OUTBOX_STDLIB_ABI "libstdc++/cxx11"
#else
#define OUTBOX_STDLIB_ABI "libstdc++/cxx98"
#endif
#else
#define OUTBOX_STDLIB_ABI "unknown"
#endif

extern "C" {

/// Plain data every plugin exports under the symbol name `outbox_plugin_manifest`.
/// Written by OUTBOX_PLUGIN; plugin authors never fill it in by hand.
struct outbox_plugin_manifest_t {
    std::uint32_t magic;        // OUTBOX_MANIFEST_MAGIC
    std::uint32_t struct_size;  // sizeof(outbox_plugin_manifest_t) as the plugin saw it
    char abi_kind[32];          // OUTBOX_ABI_KIND, NUL-terminated
    std::uint32_t abi_major;
    std::uint32_t abi_minor;
    char sdk_version[16];       // OUTBOX_SDK_VERSION of the headers the plugin was built with
    char stdlib_abi[32];        // OUTBOX_STDLIB_ABI
};

}  // extern "C"

#define OUTBOX_MANIFEST_SYMBOL "outbox_plugin_manifest"
#define OUTBOX_FACTORY_SYMBOL "outbox_create_handler"
