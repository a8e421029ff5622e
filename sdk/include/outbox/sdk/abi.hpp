#pragma once
// The plugin ABI handshake. The host reads `outbox_plugin_manifest` (plain C data) from a
// plugin file before it touches any C++ symbol in it, and refuses the file unless:
//   - abi_kind equals OUTBOX_ABI_KIND,
//   - abi_major equals the host's major,
//   - abi_minor is not newer than the host's minor,
//   - struct_size covers at least the 1.0 manifest (OUTBOX_MANIFEST_SIZE_1_0),
//   - stdlib_abi equals the host's standard-library ABI.
//
// ABI rules (what a plugin built against SDK 1.m may expect of a host 1.n, n >= m):
//   - The manifest grows only at its end, and struct_size says how much of it the plugin
//     wrote: a host reads the fields a plugin's struct_size covers and treats the rest as
//     absent (zero). So a host of a newer minor loads every plugin of an older one. The
//     first five fields keep their layout in every future major, so that any host can
//     read them and explain a mismatch.
//   - A minor may add: manifest fields at the end; virtual functions at the END of an
//     interface the host implements (Context, Db), since a plugin only calls the ones its
//     headers declared; new inline helpers, new headers, new exception codes.
//   - A major is needed for everything else: changing or removing a manifest field, adding
//     a virtual function to an interface the plugin implements (Handler: an older plugin's
//     vtable has no slot for it), reordering or changing any virtual function, changing a
//     type that crosses the boundary by value (Event, Disposition, Row, Params, the
//     exceptions' layout), or the factory's signature.
//   - A plugin built against a NEWER minor is refused: it may call a Context function this
//     host does not have.
// History: 1.0 first manifest (96 bytes); 1.1 adds handler_name (OUTBOX_PLUGIN(Class, "name"));
// 1.2 adds Context::trace(); 1.3 adds Context::replay().

#include <cstddef>
#include <cstdint>

#define OUTBOX_ABI_KIND "outboxd-cpp-handler"
#define OUTBOX_ABI_MAJOR 1
#define OUTBOX_ABI_MINOR 3
#define OUTBOX_SDK_VERSION "1.3.0"
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
    // --- end of the 1.0 manifest (OUTBOX_MANIFEST_SIZE_1_0 bytes) ---
    // Since 1.1: the handler_name() the plugin promises, NUL-terminated; empty when the
    // plugin was built with the one-argument OUTBOX_PLUGIN(Class).
    char handler_name[104];
};

}  // extern "C"

/// Size of the 1.0 manifest: the least a host accepts.
#define OUTBOX_MANIFEST_SIZE_1_0 96u
/// Longest handler name (see Handler::handler_name).
#define OUTBOX_HANDLER_NAME_MAX 100u

static_assert(offsetof(outbox_plugin_manifest_t, handler_name) == OUTBOX_MANIFEST_SIZE_1_0,
              "the 1.0 manifest is a prefix of this one");

#define OUTBOX_MANIFEST_SYMBOL "outbox_plugin_manifest"
#define OUTBOX_FACTORY_SYMBOL "outbox_create_handler"
