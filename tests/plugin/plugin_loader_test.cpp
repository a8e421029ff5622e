#include "plugin/plugin_loader.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <dlfcn.h>
#include <link.h>

#include "app/plugins_check.hpp"
#include "plugin/plugin_directory.hpp"
#include "outbox/sdk/abi.hpp"
#include "support/temp_dir.hpp"

namespace outbox::plugin {
namespace {

// "<major>.<minor>" of the ABI this host (and the fixtures built with it) speaks.
const std::string kHostAbi = std::to_string(OUTBOX_ABI_MAJOR) + "." + std::to_string(OUTBOX_ABI_MINOR);

namespace fs = std::filesystem;
using test::TempDir;

class NullDb final : public sdk::Db {
public:
    sdk::Rows exec(std::string_view, const sdk::Params&) override { return {}; }
};

class FakeContext final : public sdk::Context {
public:
    sdk::Db& db() override { return db_; }
    bool cancelled() const override { return false; }
    std::chrono::steady_clock::time_point deadline() const override {
        return std::chrono::steady_clock::now() + std::chrono::minutes{1};
    }
    const std::string& config_json() const override { return config_; }
    void log(sdk::LogLevel, std::string_view) override {}
    const sdk::TraceContext& trace() const override { return trace_; }

private:
    NullDb db_;
    sdk::TraceContext trace_;
    std::string config_ = "{}";
};

sdk::Event event_of(std::string type) {
    sdk::Event event;
    event.id = "00000000-0000-0000-0000-000000000001";
    event.type = std::move(type);
    event.company_id = "acme";
    event.payload_json = "{}";
    event.attempt = 1;
    return event;
}

/// Copies a fixture into `dir` (under its own name unless `name` is given).
fs::path copy_fixture(const fs::path& dir, const fs::path& fixture, const std::string& name = {}) {
    const fs::path target = dir / (name.empty() ? fixture.filename() : fs::path(name));
    fs::copy_file(fixture, target, fs::copy_options::overwrite_existing);
    return target;
}

void write_text(const fs::path& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary);
    out << text;
}

std::string read_text(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Builds a plugin the way an outside team does: the SDK headers and g++, nothing else.
std::string build_command(const fs::path& source, const fs::path& library, const std::string& defines = {}) {
    return "g++ -std=c++20 -shared -fPIC " + defines + " -I'" + OUTBOX_SDK_INCLUDE_DIR + "' '" + source.string() +
           "' -o '" + library.string() + "'";
}

class PluginLoaderTest : public ::testing::Test {
protected:
    LoadedPlugin expect_loaded(const fs::path& file, const HandlerConfigs& configs = {}) {
        LoadResult result = loader_.load_file(file, configs);
        if (auto* rejected = std::get_if<RejectedPlugin>(&result)) {
            ADD_FAILURE() << file << " was rejected: " << rejected->reason;
            return {};
        }
        return std::get<LoadedPlugin>(std::move(result));
    }

    std::string expect_rejected(const fs::path& file, const HandlerConfigs& configs = {}) {
        LoadResult result = loader_.load_file(file, configs);
        if (auto* loaded = std::get_if<LoadedPlugin>(&result)) {
            ADD_FAILURE() << file << " loaded as handler '" << loaded->handler_name << "' but should be rejected";
            return {};
        }
        const auto& rejected = std::get<RejectedPlugin>(result);
        EXPECT_EQ(rejected.file, file);
        EXPECT_NE(rejected.reason.find(file.filename().string()), std::string::npos)
            << "a reason names the file: " << rejected.reason;
        return rejected.reason;
    }

    TempDir private_dir_;
    TempDir plugin_dir_;
    PluginLoader loader_{private_dir_.path()};
};

TEST_F(PluginLoaderTest, GoodPluginLoadsWithNameEventTypesAndAbi) {
    const LoadedPlugin plugin = expect_loaded(OUTBOX_FIXTURE_GOOD_ECHO);
    ASSERT_NE(plugin.handler, nullptr);
    EXPECT_EQ(plugin.file, fs::path(OUTBOX_FIXTURE_GOOD_ECHO));
    EXPECT_EQ(plugin.handler_name, "echo");
    EXPECT_EQ(plugin.event_types, std::vector<std::string>{"EchoRequested"});
    EXPECT_EQ(plugin.abi, kHostAbi + " (sdk " OUTBOX_SDK_VERSION ", " OUTBOX_STDLIB_ABI ")");
    EXPECT_EQ(plugin.handler->handler_name(), "echo");
}

// coreutils' digest of a file, independent of the loader's own code.
std::string sha256sum(const fs::path& file) {
    const std::string command = "sha256sum '" + file.string() + "'";
    FILE* pipe = ::popen(command.c_str(), "r");
    if (pipe == nullptr) return "popen failed";
    char line[256] = {};
    const bool read = std::fgets(line, sizeof line, pipe) != nullptr;
    ::pclose(pipe);
    return read ? std::string(line).substr(0, 64) : "sha256sum printed nothing";
}

TEST_F(PluginLoaderTest, EachLoadReportsTheSha256OfTheBytesItLoaded) {
    const fs::path file = copy_fixture(plugin_dir_.path(), OUTBOX_FIXTURE_GOOD_ECHO);
    const std::string first = expect_loaded(file).sha256;
    EXPECT_EQ(first, sha256sum(file));
    EXPECT_EQ(expect_loaded(file).sha256, first) << "the same file is the same build";
    // Another build: the same plugin with one byte more (ignored by the dynamic loader).
    std::ofstream(file, std::ios::app | std::ios::binary) << '\n';
    const LoadedPlugin rebuilt = expect_loaded(file);
    EXPECT_EQ(rebuilt.handler_name, "echo");
    EXPECT_EQ(rebuilt.sha256, sha256sum(file));
    EXPECT_NE(rebuilt.sha256, first);
}

TEST_F(PluginLoaderTest, HandlerWorksAfterTheOriginalFileIsDeleted) {
    const fs::path file = copy_fixture(plugin_dir_.path(), OUTBOX_FIXTURE_GOOD_ECHO);
    LoadedPlugin plugin = expect_loaded(file);
    ASSERT_NE(plugin.handler, nullptr);
    fs::remove(file);

    FakeContext ctx;
    EXPECT_NO_THROW(plugin.handler->handle(event_of("EchoRequested"), ctx));
    EXPECT_EQ(plugin.handler->handler_name(), "echo");
    EXPECT_TRUE(fs::is_empty(private_dir_.path())) << "the private copy is unlinked once it is mapped";
}

// The private copy directory lives in /tmp: a cleaner may remove it and another local user
// re-create it under the same name, then swap the copy before dlopen reads it.
TEST_F(PluginLoaderTest, APrivateDirectoryOthersMayWriteOrALinkIsRefusedAndNothingIsCopiedIntoIt) {
    const fs::path dir = private_dir_.path() / "copies";
    fs::create_directory(dir);
    fs::permissions(dir, fs::perms::all);  // 0777, as an attacker's re-created directory would be
    PluginLoader loader(dir);
    const LoadResult open_to_all = loader.load_file(OUTBOX_FIXTURE_GOOD_ECHO, {});
    ASSERT_TRUE(std::holds_alternative<RejectedPlugin>(open_to_all));
    EXPECT_NE(std::get<RejectedPlugin>(open_to_all).reason.find("is not this user's alone"), std::string::npos)
        << std::get<RejectedPlugin>(open_to_all).reason;
    EXPECT_TRUE(fs::is_empty(dir)) << "nothing is written into a directory others may change";

    fs::remove(dir);
    const fs::path elsewhere = private_dir_.path() / "elsewhere";
    fs::create_directory(elsewhere);
    fs::create_directory_symlink(elsewhere, dir);
    const LoadResult linked = loader.load_file(OUTBOX_FIXTURE_GOOD_ECHO, {});
    ASSERT_TRUE(std::holds_alternative<RejectedPlugin>(linked));
    EXPECT_NE(std::get<RejectedPlugin>(linked).reason.find("cannot open the private copy directory"), std::string::npos)
        << std::get<RejectedPlugin>(linked).reason;
    EXPECT_TRUE(fs::is_empty(elsewhere));

    // Simply gone (removed by a cleaner): made again, this user's alone, and loading works.
    fs::remove(dir);
    const LoadResult again = loader.load_file(OUTBOX_FIXTURE_GOOD_ECHO, {});
    ASSERT_TRUE(std::holds_alternative<LoadedPlugin>(again)) << std::get<RejectedPlugin>(again).reason;
    EXPECT_EQ(fs::status(dir).permissions() & (fs::perms::group_all | fs::perms::others_all), fs::perms::none);
}

// dlopen is given the verified descriptor, never the copy's path, which another user could
// swap between the copy and the load: the library's recorded name is /proc/self/fd/N.
TEST_F(PluginLoaderTest, TheCopyIsLoadedThroughItsDescriptor) {
    const LoadedPlugin plugin = expect_loaded(OUTBOX_FIXTURE_GOOD_ECHO);
    ASSERT_NE(plugin.handler, nullptr);
    // The handler's vtable lies in the plugin's own image.
    const void* vtable = *reinterpret_cast<void* const*>(plugin.handler.get());
    Dl_info info{};
    ASSERT_NE(::dladdr(vtable, &info), 0);
    ASSERT_NE(info.dli_fname, nullptr);
    EXPECT_EQ(std::string(info.dli_fname).rfind("/proc/self/fd/", 0), 0u) << info.dli_fname;
}

TEST_F(PluginLoaderTest, HandlerOutlivesTheLoaderAndOtherCopies) {
    std::shared_ptr<sdk::Handler> handler;
    {
        PluginLoader loader(private_dir_.path());
        LoadResult first = loader.load_file(OUTBOX_FIXTURE_GOOD_ECHO, {});
        LoadResult second = loader.load_file(OUTBOX_FIXTURE_GOOD_ECHO, {});
        ASSERT_TRUE(std::holds_alternative<LoadedPlugin>(first));
        ASSERT_TRUE(std::holds_alternative<LoadedPlugin>(second));
        handler = std::get<LoadedPlugin>(first).handler;
    }
    FakeContext ctx;
    EXPECT_NO_THROW(handler->handle(event_of("EchoRequested"), ctx));
    EXPECT_EQ(handler->event_types(), std::vector<std::string>{"EchoRequested"});
}

TEST_F(PluginLoaderTest, ConfigSectionIsChosenByTheManifestsHandlerName) {
    const HandlerConfigs configs{
        {"another-handler", R"({"unrelated":true})"},
        {"configured", R"({"endpoint":"http://127.0.0.1:9/x"})"},
    };
    const LoadedPlugin plugin = expect_loaded(OUTBOX_FIXTURE_GOOD_CONFIG, configs);
    EXPECT_EQ(plugin.handler_name, "configured");
    EXPECT_EQ(plugin.event_types, std::vector<std::string>{"ConfigRequested"});
}

TEST_F(PluginLoaderTest, PluginThatNeedsConfigIsRejectedWithoutItsSectionAndNoOtherSectionIsTried) {
    const std::string reason =
        expect_rejected(OUTBOX_FIXTURE_GOOD_CONFIG, {{"another-handler", R"({"endpoint":"for someone else"})"}});
    EXPECT_NE(reason.find("constructor threw an exception"), std::string::npos) << reason;
    EXPECT_NE(reason.find("no handlers.<name>.config section"), std::string::npos) << reason;
}

// Each plugin is constructed exactly once, with its own section: never with "{}" first,
// never with another handler's section.
TEST_F(PluginLoaderTest, APluginIsConstructedExactlyOnceWithItsOwnSection) {
    const fs::path log = plugin_dir_.path() / "constructions.txt";
    ASSERT_EQ(::setenv("OUTBOX_TEST_CONSTRUCTIONS", log.c_str(), 1), 0);
    const LoadedPlugin plugin = expect_loaded(OUTBOX_FIXTURE_COUNTED, {{"another-handler", R"({"theirs":1})"},
                                                                       {"counted", R"({"mine":2})"}});
    ::unsetenv("OUTBOX_TEST_CONSTRUCTIONS");
    EXPECT_EQ(plugin.handler_name, "counted");
    EXPECT_EQ(read_text(log), "{\"mine\":2}\n");
}

TEST_F(PluginLoaderTest, AManifestNameThatDiffersFromHandlerNameIsRefusedNamingBoth) {
    const std::string reason = expect_rejected(OUTBOX_FIXTURE_NAME_MISMATCH);
    EXPECT_NE(reason.find("OUTBOX_PLUGIN names the handler 'promised-name' but handler_name() returns 'actual-name'"),
              std::string::npos)
        << reason;
    EXPECT_EQ(reason.find('\n'), std::string::npos) << "one line: " << reason;
}

// One-argument OUTBOX_PLUGIN: the manifest names no handler, so the section is the one
// named like the file; it is constructed once with it.
TEST_F(PluginLoaderTest, AnUnnamedPluginGetsTheSectionNamedLikeItsFile) {
    const HandlerConfigs configs{{"unnamed-config", R"({"endpoint":"http://127.0.0.1:9/x"})"}};
    const fs::path named = copy_fixture(plugin_dir_.path(), OUTBOX_FIXTURE_UNNAMED_CONFIG, "libunnamed-config.so");
    const LoadedPlugin plugin = expect_loaded(named, configs);
    EXPECT_EQ(plugin.handler_name, "unnamed-config");

    const fs::path plain = copy_fixture(plugin_dir_.path(), OUTBOX_FIXTURE_UNNAMED_CONFIG, "unnamed-config.so");
    EXPECT_EQ(expect_loaded(plain, configs).handler_name, "unnamed-config");

    // As CMake names a MODULE target: the 0.1.0 sample plugins are found this way.
    const fs::path target = copy_fixture(plugin_dir_.path(), OUTBOX_FIXTURE_UNNAMED_CONFIG, "libunnamed_config.so");
    EXPECT_EQ(expect_loaded(target, configs).handler_name, "unnamed-config");
}

TEST_F(PluginLoaderTest, AnUnnamedPluginWhoseFileNamesNoSectionIsRefusedWithTheFix) {
    // Its constructor needs the section, which the host cannot pick by the file name.
    const std::string needs = expect_rejected(OUTBOX_FIXTURE_UNNAMED_CONFIG,
                                              {{"unnamed-config", R"({"endpoint":"http://127.0.0.1:9/x"})"}});
    EXPECT_NE(needs.find("its manifest names no handler"), std::string::npos) << needs;
    EXPECT_NE(needs.find("OUTBOX_PLUGIN(Class, \"name\")"), std::string::npos) << needs;

    // Constructed with {}, it would run without the section it has: refused, not ignored.
    const std::string ignored = expect_rejected(OUTBOX_FIXTURE_UNNAMED_PLAIN, {{"unnamed-plain", R"({"x":1})"}});
    EXPECT_NE(ignored.find("has a handlers.unnamed-plain.config section but was constructed with {}"),
              std::string::npos)
        << ignored;
    EXPECT_EQ(expect_loaded(OUTBOX_FIXTURE_UNNAMED_PLAIN, {{"unnamed-plain", "{}"}}).handler_name, "unnamed-plain")
        << "an empty section is what it was constructed with";

    // A file named after another handler's section: that section is the only one tried.
    const fs::path other = copy_fixture(plugin_dir_.path(), OUTBOX_FIXTURE_UNNAMED_CONFIG, "libsomeone.so");
    const std::string wrong = expect_rejected(other, {{"someone", R"({"endpoint":"x"})"}});
    EXPECT_NE(wrong.find("constructed with handlers.someone.config (chosen by the file name) but handler_name() "
                         "returns 'unnamed-config'"),
              std::string::npos)
        << wrong;
}

TEST_F(PluginLoaderTest, APluginBuiltWithThePreviousMinorsHeadersLoads) {
    const LoadedPlugin plugin = expect_loaded(OUTBOX_FIXTURE_PREV_SDK_ECHO, {{"prev-echo", R"({"fail":false})"}});
    ASSERT_NE(plugin.handler, nullptr);
    EXPECT_EQ(plugin.handler_name, "prev-echo");
    EXPECT_EQ(plugin.abi, "1.0 (sdk 1.0.0, " OUTBOX_STDLIB_ABI ")");
    FakeContext ctx;
    EXPECT_NO_THROW(plugin.handler->handle(event_of("EchoRequested"), ctx));
    // Its section reached the constructor (chosen by the file name libprev-echo.so).
    const std::string reason = expect_rejected(OUTBOX_FIXTURE_PREV_SDK_ECHO, {{"prev-echo", R"({"fail":true})"}});
    EXPECT_NE(reason.find("with its section handlers.prev-echo.config"), std::string::npos) << reason;
}

namespace {
/// How many loaded objects are private copies of a file called `name`.
int mapped_copies_of(const std::string& name) {
    struct Search {
        std::string suffix;
        int count = 0;
    } search{"-" + name, 0};
    ::dl_iterate_phdr(
        [](dl_phdr_info* info, std::size_t, void* data) {
            auto* s = static_cast<Search*>(data);
            std::string path = info->dlpi_name == nullptr ? "" : info->dlpi_name;
            // Plugins are loaded as /proc/self/fd/N, held open while mapped: name the copy.
            if (path.rfind("/proc/self/fd/", 0) == 0) {
                std::error_code ec;
                path = fs::read_symlink(path, ec).string();
                const std::string deleted = " (deleted)";
                if (path.size() > deleted.size() && path.ends_with(deleted)) path.resize(path.size() - deleted.size());
            }
            if (path.size() >= s->suffix.size() && path.compare(path.size() - s->suffix.size(), s->suffix.size(), s->suffix) == 0) {
                ++s->count;
            }
            return 0;
        },
        &search);
    return search.count;
}
}  // namespace

// Reference-counted unloading: a replaced version stays mapped while a call holds its
// handler and is closed when the last reference goes; nothing keeps it otherwise.
TEST_F(PluginLoaderTest, AReplacedVersionIsUnloadedWhenItsLastReferenceGoes) {
    const std::string file_name = "libunload-probe.so";
    copy_fixture(plugin_dir_.path(), OUTBOX_FIXTURE_GOOD_ECHO, file_name);
    PluginDirectory directory(plugin_dir_.path(), private_dir_.path(), {});
    std::shared_ptr<sdk::Handler> in_flight;
    {
        const DirectoryChange first = directory.rescan();
        ASSERT_EQ(first.added.size(), 1U);
        in_flight = first.added.front().handler;
    }
    EXPECT_EQ(mapped_copies_of(file_name), 1);

    // A new version deployed by rename.
    copy_fixture(plugin_dir_.path(), OUTBOX_FIXTURE_GOOD_ECHO, "staging.tmp");
    fs::rename(plugin_dir_.path() / "staging.tmp", plugin_dir_.path() / file_name);
    EXPECT_EQ(directory.rescan().replaced.size(), 1U);
    EXPECT_EQ(mapped_copies_of(file_name), 2) << "the old version serves the call still holding it";

    FakeContext ctx;
    EXPECT_NO_THROW(in_flight->handle(event_of("EchoRequested"), ctx));
    in_flight.reset();
    EXPECT_EQ(mapped_copies_of(file_name), 1) << "the old version is unloaded with its last reference";

    fs::remove(plugin_dir_.path() / file_name);
    EXPECT_EQ(directory.rescan().removed.size(), 1U);
    EXPECT_EQ(mapped_copies_of(file_name), 0) << "a removed plugin nothing holds is unloaded";
}

// The factory's constructor rules and the handler-name literal are checked when the plugin
// is compiled, with a message that says what to write instead.
TEST_F(PluginLoaderTest, TheFactoryRefusesOtherConstructorsAtCompileTime) {
    const std::string body = R"(
class H : public outbox::sdk::Handler {
public:
    CTOR
    std::string handler_name() const override { return "h"; }
    std::vector<std::string> event_types() const override { return {"A"}; }
    void handle(const outbox::sdk::Event&, outbox::sdk::Context&) override {}
};
OUTBOX_PLUGIN(H, NAME)
)";
    struct Case {
        std::string ctor;
        std::string name;
        std::string message;  // empty: must compile
    };
    const std::vector<Case> cases{
        // The accepted forms compile in every fixture; these must not.
        {"explicit H(const nlohmann::json&) {}", "\"h\"", "this handler has a constructor taking nlohmann::json"},
        {"explicit H(int) {}", "\"h\"", "a handler needs `explicit HandlerClass(const std::string& config_json)` or a default constructor"},
        {"H() = default;", "\"Not A Name\"", "the name must be a string literal of 1-100 characters"},
    };
    for (std::size_t i = 0; i < cases.size(); ++i) {
        std::string source = "#include <outbox/sdk.hpp>\n" + body;
        source.replace(source.find("CTOR"), 4, cases[i].ctor);
        source.replace(source.find("NAME"), 4, cases[i].name);
        const fs::path file = plugin_dir_.path() / ("case" + std::to_string(i) + ".cpp");
        const fs::path output = plugin_dir_.path() / ("case" + std::to_string(i) + ".txt");
        write_text(file, source);
        const std::string command = "g++ -std=c++20 -fsyntax-only -I'" + std::string(OUTBOX_SDK_INCLUDE_DIR) + "' '" +
                                    file.string() + "' > '" + output.string() + "' 2>&1";
        const int status = std::system(command.c_str());
        const std::string text = read_text(output);
        if (cases[i].message.empty()) {
            EXPECT_EQ(status, 0) << cases[i].ctor << "\n" << text;
        } else {
            EXPECT_NE(status, 0) << cases[i].ctor << " must not compile";
            EXPECT_NE(text.find(cases[i].message), std::string::npos) << cases[i].ctor << "\n" << text;
        }
    }
}

TEST_F(PluginLoaderTest, AbiMajorMismatchIsRejectedBeforeConstruction) {
    const std::string reason = expect_rejected(OUTBOX_FIXTURE_ABI_MAJOR_MISMATCH);
    EXPECT_NE(reason.find("plugin ABI 99.0, host ABI " + kHostAbi), std::string::npos) << reason;
    EXPECT_NE(reason.find("major versions differ"), std::string::npos) << reason;
}

TEST_F(PluginLoaderTest, NewerAbiMinorIsRejected) {
    const std::string reason = expect_rejected(OUTBOX_FIXTURE_ABI_NEWER_MINOR);
    EXPECT_NE(reason.find("plugin ABI 1.99, host ABI " + kHostAbi), std::string::npos) << reason;
    EXPECT_NE(reason.find("newer host"), std::string::npos) << reason;
}

TEST_F(PluginLoaderTest, StandardLibraryMismatchIsRejected) {
    const std::string reason = expect_rejected(OUTBOX_FIXTURE_STDLIB_MISMATCH);
    EXPECT_NE(reason.find("libc++/1"), std::string::npos) << reason;
    EXPECT_NE(reason.find(OUTBOX_STDLIB_ABI), std::string::npos) << reason;
}

TEST_F(PluginLoaderTest, ManifestWithoutFactoryIsRejected) {
    const std::string reason = expect_rejected(OUTBOX_FIXTURE_MISSING_FACTORY);
    EXPECT_NE(reason.find("no outbox_create_handler symbol"), std::string::npos) << reason;
}

TEST_F(PluginLoaderTest, LibraryWithoutManifestIsNotAPlugin) {
    const std::string reason = expect_rejected(OUTBOX_FIXTURE_NO_MANIFEST);
    EXPECT_NE(reason.find("not an outboxd plugin"), std::string::npos) << reason;
    EXPECT_NE(reason.find("OUTBOX_PLUGIN"), std::string::npos) << reason;
}

TEST_F(PluginLoaderTest, TextFileNamedSoIsNotALoadableLibrary) {
    const fs::path file = plugin_dir_.path() / "x.so";
    write_text(file, "this is not a shared library\n");
    const std::string reason = expect_rejected(file);
    EXPECT_NE(reason.find("not a loadable shared library"), std::string::npos) << reason;
}

TEST_F(PluginLoaderTest, TruncatedLibraryIsRejectedWithoutCrashing) {
    const std::string image = read_text(OUTBOX_FIXTURE_GOOD_ECHO);
    ASSERT_GT(image.size(), 4096U);
    for (const std::size_t size : {std::size_t{10}, std::size_t{200}, image.size() / 2, image.size() - 1}) {
        const fs::path file = plugin_dir_.path() / ("libtruncated-" + std::to_string(size) + ".so");
        write_text(file, image.substr(0, size));
        const std::string reason = expect_rejected(file);
        EXPECT_NE(reason.find("not a loadable shared library"), std::string::npos) << "size " << size << ": " << reason;
    }
}

TEST_F(PluginLoaderTest, TruncatedSegmentsAreRejectedBeforeDlopenMapsThem) {
    // Without section headers only the segment check stands between dlopen and a SIGBUS
    // on the missing pages.
    std::string image = read_text(OUTBOX_FIXTURE_GOOD_ECHO);
    ElfW(Ehdr) header{};
    ASSERT_GT(image.size(), sizeof header);
    std::memcpy(&header, image.data(), sizeof header);
    header.e_shoff = 0;
    header.e_shnum = 0;
    header.e_shstrndx = 0;
    std::memcpy(image.data(), &header, sizeof header);
    const fs::path file = plugin_dir_.path() / "libno-sections.so";
    write_text(file, image.substr(0, 5000));

    const std::string reason = expect_rejected(file);
    EXPECT_NE(reason.find("not a loadable shared library: the file is truncated"), std::string::npos) << reason;
    EXPECT_NE(reason.find("a segment ends at"), std::string::npos) << reason;
}

TEST_F(PluginLoaderTest, ThrowingConstructorIsRejectedWithoutItsMessage) {
    const std::string reason = expect_rejected(OUTBOX_FIXTURE_THROWING_CTOR, {{"throwing", R"({"endpoint":"x"})"}});
    EXPECT_NE(reason.find("constructor threw an exception"), std::string::npos) << reason;
    EXPECT_NE(reason.find("std::runtime_error"), std::string::npos) << "the type name is safe to show: " << reason;
    EXPECT_EQ(reason.find("SECRET-TOKEN-123"), std::string::npos) << "what() must never be shown: " << reason;
}

TEST_F(PluginLoaderTest, InvalidHandlerNameIsRejected) {
    const std::string reason = expect_rejected(OUTBOX_FIXTURE_BAD_NAME);
    EXPECT_NE(reason.find("handler_name 'Bad Name!' is invalid"), std::string::npos) << reason;
}

TEST_F(PluginLoaderTest, MissingFileAndDirectoryAreRejected) {
    EXPECT_NE(expect_rejected(plugin_dir_.path() / "libmissing.so").find("no such file"), std::string::npos);
    fs::create_directory(plugin_dir_.path() / "libdir.so");
    EXPECT_NE(expect_rejected(plugin_dir_.path() / "libdir.so").find("not a regular file"), std::string::npos);
}

// Handler declarations that only a built plugin can get wrong, each built from one source.
TEST_F(PluginLoaderTest, InvalidHandlerDeclarationsAreRejected) {
    const fs::path source = plugin_dir_.path() / "declarations.cpp";
    write_text(source, R"(#include <stdexcept>
#include <outbox/sdk.hpp>
class Declared : public outbox::sdk::Handler {
public:
    std::string handler_name() const override {
#if VARIANT == 3
        throw std::logic_error("name SECRET-TOKEN-123");
#endif
        return "declared";
    }
    std::vector<std::string> event_types() const override {
#if VARIANT == 1
        return {};
#elif VARIANT == 2
        return {"Good", "not-PascalCase"};
#elif VARIANT == 4
        throw std::logic_error("types SECRET-TOKEN-123");
#else
        return {"Good", "Good"};
#endif
    }
    void handle(const outbox::sdk::Event&, outbox::sdk::Context&) override {}
};
OUTBOX_PLUGIN(Declared);
)");
    const std::map<int, std::string> expected{
        {1, "declares no event types"},
        {2, "invalid event type 'not-PascalCase'"},
        {3, "handler_name() threw an exception (std::logic_error)"},
        {4, "event_types() of handler 'declared' threw an exception (std::logic_error)"},
    };
    // Built in parallel (each compile is seconds of nlohmann_json); any failed compile fails the script.
    std::string script = "pids=''; ";
    for (int variant = 1; variant <= 5; ++variant) {
        const fs::path library = plugin_dir_.path() / ("libvariant" + std::to_string(variant) + ".so");
        script += build_command(source, library, "-DVARIANT=" + std::to_string(variant)) + " & pids=\"$pids $!\"; ";
    }
    script += "for pid in $pids; do wait $pid || exit 1; done";
    ASSERT_EQ(std::system(script.c_str()), 0);
    for (const auto& [variant, text] : expected) {
        const fs::path library = plugin_dir_.path() / ("libvariant" + std::to_string(variant) + ".so");
        ASSERT_TRUE(fs::exists(library)) << library;
        const std::string reason = expect_rejected(library);
        EXPECT_NE(reason.find(text), std::string::npos) << "variant " << variant << ": " << reason;
        EXPECT_EQ(reason.find("SECRET-TOKEN-123"), std::string::npos) << reason;
    }
    const LoadedPlugin deduplicated = expect_loaded(plugin_dir_.path() / "libvariant5.so");
    EXPECT_EQ(deduplicated.event_types, std::vector<std::string>{"Good"}) << "a repeated event type counts once";
}

// The first scan of a directory, as `run` does it at start and `plugins check` does it once.
DirectoryChange first_scan(const fs::path& dir, const fs::path& private_dir, const HandlerConfigs& configs = {}) {
    PluginDirectory directory(dir, private_dir, configs);
    return directory.rescan();
}

TEST_F(PluginLoaderTest, DirectoryScanKeepsGoingPastBadFiles) {
    copy_fixture(plugin_dir_.path(), OUTBOX_FIXTURE_GOOD_ECHO);
    copy_fixture(plugin_dir_.path(), OUTBOX_FIXTURE_GOOD_CONFIG);
    copy_fixture(plugin_dir_.path(), OUTBOX_FIXTURE_THROWING_CTOR);
    copy_fixture(plugin_dir_.path(), OUTBOX_FIXTURE_ABI_MAJOR_MISMATCH);
    copy_fixture(plugin_dir_.path(), OUTBOX_FIXTURE_NO_MANIFEST);
    write_text(plugin_dir_.path() / "a-text.so", "not a library");
    write_text(plugin_dir_.path() / "README.md", "ignored: not a .so");
    const TempDir elsewhere;
    const fs::path linked = copy_fixture(elsewhere.path(), OUTBOX_FIXTURE_BAD_NAME, "libtarget.so");
    fs::create_symlink(linked, plugin_dir_.path() / "libz_linked.so");

    const DirectoryChange result = first_scan(plugin_dir_.path(), private_dir_.path(),
                                              {{"configured", R"({"endpoint":"http://127.0.0.1:9"})"}});

    std::vector<std::string> loaded;
    for (const auto& plugin : result.added) {
        loaded.push_back(plugin.file.filename().string() + "=" + plugin.handler_name);
    }
    EXPECT_EQ(loaded,
              (std::vector<std::string>{"libfixture_good_config.so=configured", "libfixture_good_echo.so=echo"}));

    std::vector<std::string> rejected;
    for (const auto& plugin : result.rejected) rejected.push_back(plugin.file.filename().string());
    EXPECT_EQ(rejected, (std::vector<std::string>{"a-text.so", "libfixture_abi_major_mismatch.so",
                                                  "libfixture_no_manifest.so", "libfixture_throwing_ctor.so",
                                                  "libz_linked.so"}))
        << "rejections come in file-name order, and a *.so symlink is refused";
    EXPECT_NE(result.rejected.back().reason.find("is a symbolic link"), std::string::npos) << result.rejected.back().reason;
    EXPECT_EQ(result.rejected.back().reason.find("Bad Name!"), std::string::npos)
        << "the link's target is never loaded: " << result.rejected.back().reason;
}

TEST_F(PluginLoaderTest, DuplicateHandlerNameIsRejectedNamingTheFirstFile) {
    copy_fixture(plugin_dir_.path(), OUTBOX_FIXTURE_GOOD_ECHO, "libb_echo.so");
    copy_fixture(plugin_dir_.path(), OUTBOX_FIXTURE_DUPLICATE_ECHO, "liba_echo.so");

    const DirectoryChange result = first_scan(plugin_dir_.path(), private_dir_.path());

    ASSERT_EQ(result.added.size(), 1U);
    EXPECT_EQ(result.added[0].file.filename(), "liba_echo.so");
    ASSERT_EQ(result.rejected.size(), 1U);
    EXPECT_EQ(result.rejected[0].file.filename(), "libb_echo.so");
    const std::string& reason = result.rejected[0].reason;
    EXPECT_NE(reason.find("duplicate handler_name 'echo', already provided by"), std::string::npos) << reason;
    EXPECT_NE(reason.find("liba_echo.so"), std::string::npos) << reason;
    EXPECT_EQ(reason.rfind("libb_echo.so: ", 0), 0U) << reason;
}

TEST_F(PluginLoaderTest, MissingDirectoryIsOneRejectionNamingIt) {
    const fs::path missing = plugin_dir_.path() / "nope";
    const DirectoryChange result = first_scan(missing, private_dir_.path());
    EXPECT_TRUE(result.added.empty());
    ASSERT_EQ(result.rejected.size(), 1U);
    EXPECT_EQ(result.rejected[0].file, missing);
    EXPECT_EQ(result.rejected[0].reason, missing.string() + " does not exist");
}

// A path that exists but cannot be listed must not pass for an empty directory.
TEST_F(PluginLoaderTest, APluginPathThatIsNotADirectoryIsOneRejectionNamingIt) {
    const fs::path file = plugin_dir_.path() / "plugins";
    write_text(file, "not a directory");
    const DirectoryChange result = first_scan(file, private_dir_.path());
    EXPECT_TRUE(result.added.empty());
    ASSERT_EQ(result.rejected.size(), 1U);
    EXPECT_EQ(result.rejected[0].file, file);
    EXPECT_EQ(result.rejected[0].reason.rfind(file.string() + " cannot be listed (", 0), 0U) << result.rejected[0].reason;
}

TEST_F(PluginLoaderTest, PluginBuiltByAnOutsideTeamWithPlainGccLoads) {
    const fs::path source = plugin_dir_.path() / "outside.cpp";
    write_text(source, R"(#include <outbox/sdk.hpp>

class OutsideHandler : public outbox::sdk::Handler {
public:
    explicit OutsideHandler(const std::string& config_json) : config_(config_json) {}
    std::string handler_name() const override { return "outside-team"; }
    std::vector<std::string> event_types() const override { return {"OutsideHappened"}; }
    void handle(const outbox::sdk::Event& event, outbox::sdk::Context&) override {
        if (event.payload().at("ok") != true) throw outbox::sdk::NonRetryableError("BAD_PAYLOAD", "ok is not true");
    }

private:
    std::string config_;
};

OUTBOX_PLUGIN(OutsideHandler);
)");
    const fs::path library = plugin_dir_.path() / "libx.so";
    ASSERT_EQ(std::system(build_command(source, library).c_str()), 0) << "g++ failed to build the outside plugin";

    const LoadedPlugin plugin = expect_loaded(library);
    ASSERT_NE(plugin.handler, nullptr);
    EXPECT_EQ(plugin.handler_name, "outside-team");
    EXPECT_EQ(plugin.event_types, std::vector<std::string>{"OutsideHappened"});
    FakeContext ctx;
    sdk::Event event = event_of("OutsideHappened");
    event.payload_json = R"({"ok":true})";
    EXPECT_NO_THROW(plugin.handler->handle(event, ctx));
}

class PluginsCheckTest : public ::testing::Test {
protected:
    static std::vector<std::string> lines_of(const std::string& text) {
        std::vector<std::string> lines;
        std::istringstream in(text);
        for (std::string line; std::getline(in, line);) lines.push_back(line);
        return lines;
    }

    TempDir dir_;
};

TEST_F(PluginsCheckTest, BadFileGivesARowPerFileAndExitCodeOne) {
    copy_fixture(dir_.path(), OUTBOX_FIXTURE_GOOD_ECHO);
    copy_fixture(dir_.path(), OUTBOX_FIXTURE_STDLIB_MISMATCH);
    copy_fixture(dir_.path(), OUTBOX_FIXTURE_THROWING_CTOR);
    std::ostringstream out;

    EXPECT_EQ(app::plugins_check(dir_.path(), {}, out), 1);

    const auto lines = lines_of(out.str());
    ASSERT_EQ(lines.size(), 4U) << out.str();
    for (const char* column : {"FILE", "HANDLER", "EVENT TYPES", "SDK ABI", "RESULT"}) {
        EXPECT_NE(lines[0].find(column), std::string::npos) << lines[0];
    }
    EXPECT_EQ(lines[1].rfind("libfixture_good_echo.so", 0), 0U) << lines[1];
    EXPECT_NE(lines[1].find("echo"), std::string::npos);
    EXPECT_NE(lines[1].find("EchoRequested"), std::string::npos);
    EXPECT_NE(lines[1].find(kHostAbi + " (sdk"), std::string::npos);
    EXPECT_EQ(lines[1].substr(lines[1].size() - 2), "OK");
    EXPECT_EQ(lines[2].rfind("libfixture_stdlib_mismatch.so", 0), 0U) << lines[2];
    EXPECT_NE(lines[2].find("error: "), std::string::npos) << lines[2];
    EXPECT_NE(lines[2].find("'libc++/1'"), std::string::npos) << lines[2];
    EXPECT_EQ(lines[3].rfind("libfixture_throwing_ctor.so", 0), 0U) << lines[3];
    EXPECT_NE(lines[3].find("error: constructor threw an exception"), std::string::npos) << lines[3];
    EXPECT_EQ(out.str().find("SECRET-TOKEN-123"), std::string::npos) << out.str();
}

TEST_F(PluginsCheckTest, OnlyGoodFilesGiveExitCodeZero) {
    copy_fixture(dir_.path(), OUTBOX_FIXTURE_GOOD_ECHO);
    copy_fixture(dir_.path(), OUTBOX_FIXTURE_GOOD_CONFIG);
    std::ostringstream out;

    EXPECT_EQ(app::plugins_check(dir_.path(), {{"configured", R"({"endpoint":"http://x"})"}}, out), 0) << out.str();

    const auto lines = lines_of(out.str());
    ASSERT_EQ(lines.size(), 3U) << out.str();
    EXPECT_NE(lines[1].find("configured"), std::string::npos) << lines[1];
    EXPECT_NE(lines[2].find("echo"), std::string::npos) << lines[2];
    EXPECT_EQ(out.str().find("error"), std::string::npos) << out.str();
}

// Without --config a plugin that needs its section is not an error: it is reported with
// the handler name its manifest gives and its ABI.
TEST_F(PluginsCheckTest, WithoutAConfigFileAPluginThatNeedsItsSectionIsReportedOk) {
    copy_fixture(dir_.path(), OUTBOX_FIXTURE_GOOD_ECHO);
    copy_fixture(dir_.path(), OUTBOX_FIXTURE_GOOD_CONFIG);
    copy_fixture(dir_.path(), OUTBOX_FIXTURE_UNNAMED_CONFIG);
    std::ostringstream out;

    EXPECT_EQ(app::plugins_check(dir_.path(), {}, out, false), 0) << out.str();

    const auto lines = lines_of(out.str());
    ASSERT_EQ(lines.size(), 4U) << out.str();
    EXPECT_EQ(lines[1].rfind("libfixture_good_config.so", 0), 0U) << lines[1];
    EXPECT_NE(lines[1].find("configured"), std::string::npos) << lines[1];
    EXPECT_NE(lines[1].find(kHostAbi + " (sdk"), std::string::npos) << lines[1];
    EXPECT_NE(lines[1].find("OK (needs its config section to construct; check with --config)"), std::string::npos)
        << lines[1];
    EXPECT_NE(lines[2].find("echo"), std::string::npos) << lines[2];
    EXPECT_NE(lines[2].find("EchoRequested"), std::string::npos) << lines[2];
    EXPECT_EQ(lines[2].substr(lines[2].size() - 2), "OK") << lines[2];
    EXPECT_EQ(lines[3].rfind("libfixture_unnamed_config.so", 0), 0U) << lines[3];
    EXPECT_NE(lines[3].find("OK (needs its config section"), std::string::npos) << lines[3];
    EXPECT_EQ(out.str().find("error"), std::string::npos) << out.str();
}

// With --config each plugin is constructed with its section, and one that cannot be is an error.
TEST_F(PluginsCheckTest, WithAConfigFileEachPluginIsConstructedWithItsSection) {
    copy_fixture(dir_.path(), OUTBOX_FIXTURE_GOOD_CONFIG);
    copy_fixture(dir_.path(), OUTBOX_FIXTURE_UNNAMED_CONFIG);
    std::ostringstream out;

    EXPECT_EQ(app::plugins_check(dir_.path(), {{"configured", R"({"endpoint":"http://x"})"}}, out, true), 1)
        << out.str();

    const auto lines = lines_of(out.str());
    ASSERT_EQ(lines.size(), 3U) << out.str();
    EXPECT_NE(lines[1].find("ConfigRequested"), std::string::npos) << lines[1];
    EXPECT_EQ(lines[1].substr(lines[1].size() - 2), "OK") << lines[1];
    EXPECT_NE(lines[2].find("error: constructor threw an exception"), std::string::npos) << lines[2];
}

TEST_F(PluginsCheckTest, EmptyDirectoryHasNoPluginsAndExitsZero) {
    std::ostringstream out;
    EXPECT_EQ(app::plugins_check(dir_.path(), {}, out), 0);
    EXPECT_EQ(out.str(), "no plugins found in " + dir_.path().string() + "\n");
}

TEST_F(PluginsCheckTest, MissingDirectoryExitsOne) {
    std::ostringstream out;
    EXPECT_EQ(app::plugins_check(dir_.path() / "missing", {}, out), 1);
    EXPECT_EQ(out.str(), "error: " + (dir_.path() / "missing").string() + " does not exist\n");
}

// `run` refuses a plugin others could have swapped; the check must not call it OK.
TEST_F(PluginsCheckTest, AFileOrDirectoryRunWouldNotTrustIsAnError) {
    copy_fixture(dir_.path(), OUTBOX_FIXTURE_GOOD_ECHO);
    const fs::path config_plugin = copy_fixture(dir_.path(), OUTBOX_FIXTURE_GOOD_CONFIG);
    fs::permissions(config_plugin, fs::perms::group_write, fs::perm_options::add);
    std::ostringstream file_out;

    EXPECT_EQ(app::plugins_check(dir_.path(), {{"configured", R"({"endpoint":"http://x"})"}}, file_out), 1);

    const auto lines = lines_of(file_out.str());
    ASSERT_EQ(lines.size(), 3U) << file_out.str();
    EXPECT_EQ(lines[1].rfind("libfixture_good_config.so", 0), 0U) << lines[1];
    EXPECT_NE(lines[1].find("is writable by its group; make it writable by its owner only (chmod go-w)"),
              std::string::npos)
        << lines[1];
    EXPECT_EQ(lines[2].substr(lines[2].size() - 2), "OK") << lines[2];

    fs::permissions(config_plugin, fs::perms::group_write, fs::perm_options::remove);
    fs::permissions(dir_.path(), fs::perms::others_write, fs::perm_options::add);
    std::ostringstream dir_out;
    EXPECT_EQ(app::plugins_check(dir_.path(), {}, dir_out), 1);
    EXPECT_EQ(dir_out.str(), "error: " + dir_.path().string() +
                                 " is writable by others; make it writable by its owner only (chmod go-w)\n");
    fs::permissions(dir_.path(), fs::perms::others_write, fs::perm_options::remove);
}

}  // namespace
}  // namespace outbox::plugin
