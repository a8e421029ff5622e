#pragma once

#include <string>

#include "outbox/sdk/abi.hpp"

namespace outbox::core {

/// The result of comparing a plugin's manifest with this host's ABI.
struct AbiVerdict {
    bool compatible = false;
    std::string reason;  // empty when compatible; otherwise one sentence naming both versions and the fix
};

/// What this host was built with (the SDK headers it compiled against).
outbox_plugin_manifest_t host_manifest() noexcept;

/// Compares `plugin` (copied out of the file) with `host`. Pure. Only the first five
/// fields are trusted until magic, kind and major match.
AbiVerdict check_abi(const outbox_plugin_manifest_t& plugin, const outbox_plugin_manifest_t& host);

/// "1.0 (sdk 1.0.0, libstdc++/cxx11)"
std::string describe_abi(const outbox_plugin_manifest_t& manifest);

}  // namespace outbox::core
