#include "core/abi_check.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "support/contains.hpp"

namespace {

using outbox::core::check_abi;
using outbox::core::describe_abi;
using outbox::core::host_manifest;

using outbox::test::contains;

void set_text(char* field, std::size_t capacity, const char* text) {
    std::memset(field, 0, capacity);
    std::strncpy(field, text, capacity - 1);
}

outbox_plugin_manifest_t host_at(std::uint32_t major, std::uint32_t minor) {
    auto m = host_manifest();
    m.abi_major = major;
    m.abi_minor = minor;
    return m;
}

TEST(AbiCheck, HostManifestDescribesTheSdkItWasBuiltWith) {
    const auto m = host_manifest();
    EXPECT_EQ(m.magic, OUTBOX_MANIFEST_MAGIC);
    EXPECT_EQ(m.struct_size, sizeof(outbox_plugin_manifest_t));
    EXPECT_STREQ(m.abi_kind, OUTBOX_ABI_KIND);
    EXPECT_EQ(m.abi_major, static_cast<std::uint32_t>(OUTBOX_ABI_MAJOR));
    EXPECT_EQ(m.abi_minor, static_cast<std::uint32_t>(OUTBOX_ABI_MINOR));
    EXPECT_STREQ(m.sdk_version, OUTBOX_SDK_VERSION);
    EXPECT_STREQ(m.stdlib_abi, OUTBOX_STDLIB_ABI);
}

TEST(AbiCheck, HostManifestIsCompatibleWithItself) {
    const auto verdict = check_abi(host_manifest(), host_manifest());
    EXPECT_TRUE(verdict.compatible) << verdict.reason;
    EXPECT_EQ(verdict.reason, "");
}

TEST(AbiCheck, OlderMinorIsCompatible) {
    const auto verdict = check_abi(host_at(1, 1), host_at(1, 3));
    EXPECT_TRUE(verdict.compatible) << verdict.reason;
}

TEST(AbiCheck, WrongMagicIsRejected) {
    auto plugin = host_manifest();
    plugin.magic = 0xDEADBEEF;
    const auto verdict = check_abi(plugin, host_at(1, 2));
    EXPECT_FALSE(verdict.compatible);
    EXPECT_TRUE(contains(verdict.reason, "magic")) << verdict.reason;
    EXPECT_TRUE(contains(verdict.reason, "plugin ABI unknown, host ABI 1.2"))
        << "nothing past the magic can be trusted, so the plugin's version is unknown: " << verdict.reason;
    EXPECT_TRUE(contains(verdict.reason, "OUTBOX_PLUGIN()")) << "the reason names the fix: " << verdict.reason;
}

TEST(AbiCheck, OtherAbiKindIsRejected) {
    auto plugin = host_at(1, 0);
    set_text(plugin.abi_kind, sizeof plugin.abi_kind, "outboxd-rust-handler");
    const auto verdict = check_abi(plugin, host_at(1, 0));
    EXPECT_FALSE(verdict.compatible);
    EXPECT_TRUE(contains(verdict.reason, "'outboxd-rust-handler'")) << verdict.reason;
    EXPECT_TRUE(contains(verdict.reason, "'" OUTBOX_ABI_KIND "'")) << verdict.reason;
    EXPECT_TRUE(contains(verdict.reason, "plugin ABI 1.0, host ABI 1.0")) << verdict.reason;
}

TEST(AbiCheck, OtherMajorIsRejected) {
    const auto verdict = check_abi(host_at(2, 0), host_at(1, 4));
    EXPECT_FALSE(verdict.compatible);
    EXPECT_TRUE(contains(verdict.reason, "plugin ABI 2.0, host ABI 1.4")) << verdict.reason;
    EXPECT_TRUE(contains(verdict.reason, "major")) << verdict.reason;
    EXPECT_TRUE(contains(verdict.reason, "rebuild")) << verdict.reason;
}

TEST(AbiCheck, NewerMinorIsRejected) {
    const auto verdict = check_abi(host_at(1, 3), host_at(1, 2));
    EXPECT_FALSE(verdict.compatible);
    EXPECT_TRUE(contains(verdict.reason, "plugin ABI 1.3, host ABI 1.2")) << verdict.reason;
    EXPECT_TRUE(contains(verdict.reason, "upgrade outboxd")) << verdict.reason;
}

TEST(AbiCheck, OtherStandardLibraryIsRejected) {
    auto plugin = host_at(1, 0);
    set_text(plugin.stdlib_abi, sizeof plugin.stdlib_abi, "libc++/1");
    auto host = host_at(1, 0);
    set_text(host.stdlib_abi, sizeof host.stdlib_abi, "libstdc++/cxx11");
    const auto verdict = check_abi(plugin, host);
    EXPECT_FALSE(verdict.compatible);
    EXPECT_TRUE(contains(verdict.reason, "'libc++/1'")) << verdict.reason;
    EXPECT_TRUE(contains(verdict.reason, "'libstdc++/cxx11'")) << verdict.reason;
    EXPECT_TRUE(contains(verdict.reason, "plugin ABI 1.0, host ABI 1.0")) << verdict.reason;
}

TEST(AbiCheck, TruncatedManifestIsRejected) {
    auto plugin = host_at(1, 0);
    plugin.struct_size = 24;
    const auto verdict = check_abi(plugin, host_at(1, 0));
    EXPECT_FALSE(verdict.compatible);
    EXPECT_TRUE(contains(verdict.reason, "truncated (24 bytes)")) << verdict.reason;
    EXPECT_TRUE(contains(verdict.reason, "plugin ABI 1.0, host ABI 1.0")) << verdict.reason;
}

// struct_size is the manifest's version: a 1.0 plugin wrote the 96-byte manifest without
// handler_name, and a 1.1 host must still load it.
TEST(AbiCheck, ShorterManifestOfAnOlderMinorIsAccepted) {
    auto plugin = host_at(1, 0);
    plugin.struct_size = OUTBOX_MANIFEST_SIZE_1_0;
    EXPECT_LT(plugin.struct_size, sizeof(outbox_plugin_manifest_t));
    const auto verdict = check_abi(plugin, host_at(1, 1));
    EXPECT_TRUE(verdict.compatible) << verdict.reason;

    plugin.struct_size = OUTBOX_MANIFEST_SIZE_1_0 - 1;
    EXPECT_FALSE(check_abi(plugin, host_at(1, 1)).compatible) << "less than the 1.0 manifest is truncated";
}

TEST(AbiCheck, UnterminatedTextFieldsAreReadWithinTheirBounds) {
    auto plugin = host_at(1, 0);
    std::memset(plugin.stdlib_abi, 'x', sizeof plugin.stdlib_abi);  // no NUL: a corrupt or hostile manifest
    const auto verdict = check_abi(plugin, host_at(1, 0));
    EXPECT_FALSE(verdict.compatible);
    EXPECT_TRUE(contains(verdict.reason, "'" + std::string(sizeof plugin.stdlib_abi, 'x') + "'")) << verdict.reason;
}

TEST(AbiCheck, DescribeNamesVersionSdkAndStandardLibrary) {
    auto m = host_at(1, 2);
    set_text(m.sdk_version, sizeof m.sdk_version, "1.2.3");
    set_text(m.stdlib_abi, sizeof m.stdlib_abi, "libstdc++/cxx11");
    EXPECT_EQ(describe_abi(m), "1.2 (sdk 1.2.3, libstdc++/cxx11)");
}

}  // namespace
