#include "core/abi_check.hpp"

#include <cstring>

namespace outbox::core {
namespace {
std::string bounded(const char* text, std::size_t capacity) { return std::string(text, strnlen(text, capacity)); }
}  // namespace

outbox_plugin_manifest_t host_manifest() noexcept {
    return outbox_plugin_manifest_t{OUTBOX_MANIFEST_MAGIC, sizeof(outbox_plugin_manifest_t), OUTBOX_ABI_KIND,
                                    OUTBOX_ABI_MAJOR,      OUTBOX_ABI_MINOR,                 OUTBOX_SDK_VERSION,
                                    OUTBOX_STDLIB_ABI,     ""};
}

std::string describe_abi(const outbox_plugin_manifest_t& m) {
    return std::to_string(m.abi_major) + "." + std::to_string(m.abi_minor) + " (sdk " +
           bounded(m.sdk_version, sizeof m.sdk_version) + ", " + bounded(m.stdlib_abi, sizeof m.stdlib_abi) + ")";
}

AbiVerdict check_abi(const outbox_plugin_manifest_t& plugin, const outbox_plugin_manifest_t& host) {
    const std::string host_version = std::to_string(host.abi_major) + "." + std::to_string(host.abi_minor);
    if (plugin.magic != OUTBOX_MANIFEST_MAGIC) {
        // Nothing else in the struct can be trusted, so the plugin's version is unknown.
        return {false, "plugin ABI unknown, host ABI " + host_version +
                           ": outbox_plugin_manifest has the wrong magic number, so this is not an outboxd plugin "
                           "manifest; build the plugin with OUTBOX_PLUGIN() from the outboxd SDK"};
    }
    const std::string versions = "plugin ABI " + std::to_string(plugin.abi_major) + "." +
                                 std::to_string(plugin.abi_minor) + ", host ABI " + host_version;
    const std::string kind = bounded(plugin.abi_kind, sizeof plugin.abi_kind);
    const std::string host_kind = bounded(host.abi_kind, sizeof host.abi_kind);
    if (kind != host_kind) {
        return {false, versions + ": plugin ABI kind '" + kind + "' is not '" + host_kind +
                           "'; build it with the outboxd C++ SDK"};
    }
    if (plugin.abi_major != host.abi_major) {
        return {false, versions + ": major versions differ; rebuild the plugin against the SDK " +
                           std::to_string(host.abi_major) + ".x headers shipped with this outboxd"};
    }
    // struct_size is the manifest's version: an older minor wrote a shorter manifest, and
    // the fields it lacks read as empty. Less than the 1.0 manifest is not a manifest.
    if (plugin.struct_size < OUTBOX_MANIFEST_SIZE_1_0) {
        return {false, versions + ": the manifest is truncated (" + std::to_string(plugin.struct_size) +
                           " bytes); rebuild the plugin with the SDK headers"};
    }
    if (plugin.abi_minor > host.abi_minor) {
        return {false, versions + ": the plugin needs a newer host; upgrade outboxd or rebuild the plugin against SDK " +
                           std::to_string(host.abi_major) + "." + std::to_string(host.abi_minor)};
    }
    const std::string stdlib = bounded(plugin.stdlib_abi, sizeof plugin.stdlib_abi);
    const std::string host_stdlib = bounded(host.stdlib_abi, sizeof host.stdlib_abi);
    if (stdlib != host_stdlib) {
        return {false, versions + ": plugin standard library ABI '" + stdlib + "' differs from the host's '" +
                           host_stdlib + "'; rebuild the plugin with the compiler and standard library of outboxd"};
    }
    return {true, {}};
}

}  // namespace outbox::core
