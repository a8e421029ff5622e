// Which plugin files the host trusts: symbolic links, the directories above the plugin
// directory, owners and modes, and files swapped under the name while the directory is
// being scanned. Real fixture .so files, no database.
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "app/plugins_check.hpp"
#include "plugin/plugin_directory.hpp"
#include "support/contains.hpp"
#include "support/temp_dir.hpp"

namespace outbox::plugin {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using test::TempDir;

constexpr uid_t kOtherUser = 12345;

fs::path copy_trusted_fixture(const fs::path& fixture, const fs::path& target) {
    fs::copy_file(fixture, target, fs::copy_options::overwrite_existing);
    return target;
}

void chmod_or_fail(const fs::path& path, mode_t mode) { ASSERT_EQ(::chmod(path.c_str(), mode), 0) << path; }

std::string reasons(const DirectoryChange& change) {
    std::string text;
    for (const auto& rejected : change.rejected) text += rejected.reason + "\n";
    return text;
}

using outbox::test::contains;

class PluginTrust : public ::testing::Test {
protected:
    void SetUp() override {
        fs::create_directory(private_dir_);
        fs::create_directories(plugins_);
    }
    std::unique_ptr<PluginDirectory> directory(const fs::path& dir) {
        return std::make_unique<PluginDirectory>(dir, private_dir_, HandlerConfigs{});
    }

    TempDir root_;
    fs::path private_dir_ = root_.path() / "private";
    fs::path plugins_ = root_.path() / "srv" / "outboxd" / "plugins";
};

TEST_F(PluginTrust, ASymlinkedEntryIsRefusedOnceAndNotFollowed) {
    const fs::path target = copy_trusted_fixture(OUTBOX_FIXTURE_GOOD_ECHO, root_.path() / "libecho.so");
    fs::create_symlink(target, plugins_ / "libecho.so");
    auto dir = directory(plugins_);

    const DirectoryChange first = dir->rescan();
    EXPECT_TRUE(first.added.empty()) << "the link's target is trusted, but a link is never followed";
    ASSERT_EQ(first.rejected.size(), 1U) << reasons(first);
    EXPECT_EQ(first.rejected[0].file, plugins_ / "libecho.so");
    EXPECT_TRUE(contains(first.rejected[0].reason, "libecho.so: is a symbolic link, and symbolic links are refused"))
        << first.rejected[0].reason;
    EXPECT_TRUE(contains(first.rejected[0].reason, "rename it into place")) << first.rejected[0].reason;
    EXPECT_TRUE(dir->rescan().rejected.empty()) << "reported once, not on every rescan";
}

TEST_F(PluginTrust, ASymlinkRenamedOverALoadedFileIsRefusedAndTheLoadedVersionKeepsServing) {
    copy_trusted_fixture(OUTBOX_FIXTURE_GOOD_ECHO, plugins_ / "libecho.so");
    auto dir = directory(plugins_);
    ASSERT_EQ(dir->rescan().added.size(), 1U);

    const fs::path target = copy_trusted_fixture(OUTBOX_FIXTURE_VERSIONED_V1, root_.path() / "libother.so");
    fs::create_symlink(target, plugins_ / ".staging");
    fs::rename(plugins_ / ".staging", plugins_ / "libecho.so");
    const DirectoryChange change = dir->rescan();
    EXPECT_FALSE(change.routing_changed());
    ASSERT_EQ(change.rejected.size(), 1U) << reasons(change);
    EXPECT_TRUE(contains(change.rejected[0].reason, "symbolic link")) << change.rejected[0].reason;
    ASSERT_EQ(dir->current().size(), 1U);
    EXPECT_EQ(dir->current()[0].handler_name, "echo");
}

TEST_F(PluginTrust, APluginDirectoryThatIsASymlinkIsRefused) {
    copy_trusted_fixture(OUTBOX_FIXTURE_GOOD_ECHO, plugins_ / "libecho.so");
    const fs::path link = root_.path() / "plugins-link";
    fs::create_directory_symlink(plugins_, link);
    const DirectoryChange change = directory(link)->rescan();
    EXPECT_TRUE(change.added.empty());
    ASSERT_EQ(change.rejected.size(), 1U) << reasons(change);
    EXPECT_EQ(change.rejected[0].file, link);
    EXPECT_EQ(change.rejected[0].reason,
              link.string() + " is a symbolic link; set plugins.dir to the directory it points to");
}

// Root owns the directory, so only the mode can make it untrusted: root-owned is not enough.
TEST_F(PluginTrust, AGroupWritableParentIsOneRejectionNamingItAndWhatIsLoadedKeepsServing) {
    copy_trusted_fixture(OUTBOX_FIXTURE_GOOD_ECHO, plugins_ / "libecho.so");
    auto dir = directory(plugins_);
    ASSERT_EQ(dir->rescan().added.size(), 1U);

    const fs::path parent = root_.path() / "srv";
    chmod_or_fail(parent, 0775);
    copy_trusted_fixture(OUTBOX_FIXTURE_VERSIONED_V1, plugins_ / "libversioned.so");
    const DirectoryChange change = dir->rescan();
    EXPECT_FALSE(change.routing_changed()) << "nothing is loaded from an untrusted directory";
    ASSERT_EQ(change.rejected.size(), 1U) << reasons(change);
    EXPECT_EQ(change.rejected[0].file, plugins_);
    EXPECT_EQ(change.rejected[0].reason, plugins_.string() + " is not trusted: its parent directory " + parent.string() +
                                             " is writable by its group; make it writable by its owner only "
                                             "(chmod go-w) or set its sticky bit");
    EXPECT_TRUE(dir->rescan().rejected.empty()) << "reported once";
    ASSERT_EQ(dir->current().size(), 1U) << "the host keeps serving what it loaded";

    chmod_or_fail(parent, 0755);
    EXPECT_EQ(dir->rescan().added.size(), 1U) << "trusted again: the new file is loaded";
}

TEST_F(PluginTrust, AnOthersWritableParentHigherUpIsRefused) {
    chmod_or_fail(root_.path(), 0707);
    const DirectoryChange change = directory(plugins_)->rescan();
    ASSERT_EQ(change.rejected.size(), 1U) << reasons(change);
    EXPECT_TRUE(contains(change.rejected[0].reason,
                         "its parent directory " + root_.path().string() + " is writable by others"))
        << change.rejected[0].reason;
    chmod_or_fail(root_.path(), 0700);
}

TEST_F(PluginTrust, AWritableParentWithTheStickyBitIsAccepted) {
    chmod_or_fail(root_.path() / "srv", 01777);  // like /tmp: only an entry's owner may rename it
    copy_trusted_fixture(OUTBOX_FIXTURE_GOOD_ECHO, plugins_ / "libecho.so");
    const DirectoryChange change = directory(plugins_)->rescan();
    EXPECT_TRUE(change.rejected.empty()) << reasons(change);
    EXPECT_EQ(change.added.size(), 1U);
}

// The path may go through a symbolic link; the directory holding the link decides where
// the path leads, so it is checked too.
TEST_F(PluginTrust, AWritableDirectoryHoldingASymlinkOnThePathIsRefused) {
    const fs::path open_dir = root_.path() / "open";
    fs::create_directory(open_dir);
    fs::create_directory_symlink(root_.path() / "srv" / "outboxd", open_dir / "outboxd");
    copy_trusted_fixture(OUTBOX_FIXTURE_GOOD_ECHO, plugins_ / "libecho.so");
    const fs::path through_link = open_dir / "outboxd" / "plugins";

    EXPECT_EQ(directory(through_link)->rescan().added.size(), 1U) << "a link in a trusted directory is fine";

    chmod_or_fail(open_dir, 0775);
    const DirectoryChange change = directory(through_link)->rescan();
    ASSERT_EQ(change.rejected.size(), 1U) << reasons(change);
    EXPECT_TRUE(contains(change.rejected[0].reason, "its parent directory " + open_dir.string() + " is writable by its group"))
        << change.rejected[0].reason;
}

// ...and so are the real parents of the directory the path leads to, which the path
// itself does not name.
TEST_F(PluginTrust, AWritableParentOfWhereASymlinkOnThePathLeadsIsRefused) {
    fs::create_directory_symlink(root_.path() / "srv" / "outboxd", root_.path() / "outboxd");
    copy_trusted_fixture(OUTBOX_FIXTURE_GOOD_ECHO, plugins_ / "libecho.so");
    chmod_or_fail(root_.path() / "srv", 0775);
    const DirectoryChange change = directory(root_.path() / "outboxd" / "plugins")->rescan();
    EXPECT_TRUE(change.added.empty());
    ASSERT_EQ(change.rejected.size(), 1U) << reasons(change);
    EXPECT_TRUE(contains(change.rejected[0].reason,
                         "its parent directory " + (root_.path() / "srv").string() + " is writable by its group"))
        << change.rejected[0].reason;
}

TEST_F(PluginTrust, AParentOwnedByAnotherUserIsRefused) {
    if (::geteuid() != 0) GTEST_SKIP() << "only root can give a directory to another user";
    const fs::path parent = root_.path() / "srv" / "outboxd";
    ASSERT_EQ(::chown(parent.c_str(), kOtherUser, 0), 0);
    const DirectoryChange change = directory(plugins_)->rescan();
    ASSERT_EQ(change.rejected.size(), 1U) << reasons(change);
    EXPECT_TRUE(contains(change.rejected[0].reason, "its parent directory " + parent.string() + " is owned by uid 12345"))
        << change.rejected[0].reason;
}

TEST_F(PluginTrust, AFileOwnedByAnotherUserIsRefused) {
    if (::geteuid() != 0) GTEST_SKIP() << "only root can give a file to another user";
    const fs::path file = copy_trusted_fixture(OUTBOX_FIXTURE_GOOD_ECHO, plugins_ / "libecho.so");
    ASSERT_EQ(::chown(file.c_str(), kOtherUser, 0), 0);
    const DirectoryChange change = directory(plugins_)->rescan();
    EXPECT_TRUE(change.added.empty());
    ASSERT_EQ(change.rejected.size(), 1U) << reasons(change);
    EXPECT_TRUE(contains(change.rejected[0].reason, "is owned by uid 12345, neither root nor the user outboxd runs as"))
        << change.rejected[0].reason;
}

// `outboxd plugins check` scans with the same code, so it refuses what `run` refuses.
TEST_F(PluginTrust, PluginsCheckRefusesSymlinksAndUntrustedParentsAsRunDoes) {
    copy_trusted_fixture(OUTBOX_FIXTURE_GOOD_ECHO, plugins_ / "libecho.so");
    fs::create_symlink(plugins_ / "libecho.so", plugins_ / "liblinked.so");
    std::ostringstream with_link;
    EXPECT_EQ(app::plugins_check(plugins_, {}, with_link), 1);
    EXPECT_TRUE(contains(with_link.str(), "error: is a symbolic link, and symbolic links are refused")) << with_link.str();

    chmod_or_fail(root_.path() / "srv", 0775);
    std::ostringstream with_parent;
    EXPECT_EQ(app::plugins_check(plugins_, {}, with_parent), 1);
    EXPECT_EQ(with_parent.str(), "error: " + plugins_.string() + " is not trusted: its parent directory " +
                                     (root_.path() / "srv").string() +
                                     " is writable by its group; make it writable by its owner only (chmod go-w) or "
                                     "set its sticky bit\n");
}

/// Sets OUTBOX_TEST_PROBE_FILE (read by the env_probe fixture) for one test.
class ProbeFile {
public:
    explicit ProbeFile(fs::path path) : path_(std::move(path)) { ::setenv("OUTBOX_TEST_PROBE_FILE", path_.c_str(), 1); }
    ~ProbeFile() { ::unsetenv("OUTBOX_TEST_PROBE_FILE"); }
    ProbeFile(const ProbeFile&) = delete;
    ProbeFile& operator=(const ProbeFile&) = delete;
    [[nodiscard]] bool written() const { return fs::exists(path_); }

private:
    fs::path path_;
};

// Deterministic half of the race below: the file checked is the file loaded, whatever
// the name points to by the time the loader runs.
TEST_F(PluginTrust, TheLoaderCopiesFromTheDescriptorItIsGivenNotFromThePath) {
    const ProbeFile probe(root_.path() / "probe.txt");
    const fs::path name = copy_trusted_fixture(OUTBOX_FIXTURE_GOOD_ECHO, plugins_ / "libswapped.so");
    const int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    copy_trusted_fixture(OUTBOX_FIXTURE_ENV_PROBE, plugins_ / ".next");
    fs::rename(plugins_ / ".next", name);

    PluginLoader loader(private_dir_);
    const LoadResult result = loader.load_open_file(name, fd, {});
    ::close(fd);
    ASSERT_TRUE(std::holds_alternative<LoadedPlugin>(result)) << std::get<RejectedPlugin>(result).reason;
    EXPECT_EQ(std::get<LoadedPlugin>(result).handler_name, "echo");
    EXPECT_FALSE(probe.written()) << "the file now at the path was loaded instead of the one opened";
}

// The race the descriptor-based checks close: while the directory is rescanned again and
// again, a trusted file and an untrusted one are renamed over the same name in turn. The
// untrusted file is the env_probe fixture, whose library constructor writes the probe file
// as soon as it is mapped: the file must never appear.
enum class Untrusted { WorldWritable, OtherOwner, Symlink };

class PluginTrustRace : public PluginTrust, public ::testing::WithParamInterface<Untrusted> {};

TEST_P(PluginTrustRace, AnUntrustedFileSwappedInWhileRescanningIsNeverLoaded) {
    if (GetParam() == Untrusted::OtherOwner && ::geteuid() != 0) GTEST_SKIP() << "only root can chown";
    const fs::path probe = root_.path() / "probe.txt";
    const ProbeFile probe_env(probe);

    // The marker works: loading the probe on purpose writes it.
    {
        PluginLoader loader(private_dir_);
        ASSERT_TRUE(std::holds_alternative<LoadedPlugin>(loader.load_file(OUTBOX_FIXTURE_ENV_PROBE, {})));
        ASSERT_TRUE(fs::exists(probe)) << "the probe fixture did not record its loading";
        fs::remove(probe);
    }

    const fs::path staging = root_.path() / "staging";
    fs::create_directory(staging);
    // Two trusted inodes, so that each trusted turn is a new version to load even when the
    // untrusted turn in between was never recorded (a refused link keeps the loaded version).
    const std::array<fs::path, 2> trusted{copy_trusted_fixture(OUTBOX_FIXTURE_GOOD_ECHO, staging / "trusted-a"),
                                          copy_trusted_fixture(OUTBOX_FIXTURE_GOOD_ECHO, staging / "trusted-b")};
    const fs::path untrusted = copy_trusted_fixture(OUTBOX_FIXTURE_ENV_PROBE, staging / "untrusted");
    switch (GetParam()) {
        case Untrusted::WorldWritable: chmod_or_fail(untrusted, 0666); break;
        case Untrusted::OtherOwner: ASSERT_EQ(::chown(untrusted.c_str(), kOtherUser, 0), 0); break;
        case Untrusted::Symlink: break;  // trusted owner and mode, but only reachable through a link
    }
    const fs::path name = plugins_ / "libswapped.so";
    copy_trusted_fixture(OUTBOX_FIXTURE_GOOD_ECHO, name);

    std::atomic<long> swaps{0};
    // Stopped and joined by its destructor too, should an assertion end the test early.
    std::jthread swapper([&](const std::stop_token& stop) {
        const fs::path next = plugins_ / ".next";  // not *.so: never scanned
        for (std::size_t turn = 0; !stop.stop_requested(); ++turn) {
            const bool use_trusted = turn % 2 == 0;
            ::unlink(next.c_str());
            const bool made = use_trusted || GetParam() != Untrusted::Symlink
                                  ? ::link((use_trusted ? trusted[turn / 2 % 2] : untrusted).c_str(), next.c_str()) == 0
                                  : ::symlink(untrusted.c_str(), next.c_str()) == 0;
            if (made && ::rename(next.c_str(), name.c_str()) == 0) ++swaps;
        }
    });

    auto dir = directory(plugins_);
    long loads = 0;
    long refusals = 0;
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    // Enough of both outcomes that the swaps really interleaved with checks and loads.
    for (int scans = 0; (loads < 100 || refusals < 100) && std::chrono::steady_clock::now() < deadline; ++scans) {
        const DirectoryChange change = dir->rescan();
        loads += static_cast<long>(change.added.size() + change.replaced.size());
        refusals += static_cast<long>(change.rejected.size());
        for (const auto& plugin : change.added) ASSERT_EQ(plugin.handler_name, "echo");
        for (const auto& plugin : change.replaced) ASSERT_EQ(plugin.handler_name, "echo");
        ASSERT_FALSE(fs::exists(probe)) << "the untrusted plugin's code ran after " << scans << " scans";
    }
    swapper.request_stop();
    swapper.join();
    EXPECT_GE(loads, 100) << "swaps: " << swaps;
    EXPECT_GE(refusals, 100) << "swaps: " << swaps;
    EXPECT_FALSE(fs::exists(probe)) << "the untrusted plugin's code ran";
}

INSTANTIATE_TEST_SUITE_P(Swaps, PluginTrustRace,
                         ::testing::Values(Untrusted::WorldWritable, Untrusted::OtherOwner, Untrusted::Symlink),
                         [](const ::testing::TestParamInfo<Untrusted>& info) {
                             switch (info.param) {
                                 case Untrusted::WorldWritable: return std::string("WorldWritableFile");
                                 case Untrusted::OtherOwner: return std::string("FileOfAnotherUser");
                                 case Untrusted::Symlink: return std::string("Symlink");
                             }
                             return std::string("Unknown");
                         });

}  // namespace
}  // namespace outbox::plugin
