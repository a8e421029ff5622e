#include "plugin/plugin_loader.hpp"

#include "plugin/unique_fd.hpp"

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <set>
#include <string_view>
#include <system_error>
#include <typeinfo>
#include <utility>
#include <variant>
#include <vector>  // before the Boost.DLL headers when BOOST_DLL_USE_STD_FS is set

#include <boost/core/demangle.hpp>
#include <boost/dll/shared_library.hpp>
#include <cxxabi.h>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/abi_check.hpp"
#include "core/identifiers.hpp"
#include "outbox/sdk/abi.hpp"
#include "outbox/sdk/plugin.hpp"

namespace outbox::plugin {
namespace {

namespace fs = std::filesystem;
using Factory = sdk::detail::HandlerFactory;

constexpr std::size_t kMaxShownChars = 100;
constexpr std::size_t kMaxDlerrorChars = 300;

/// glibc finds an already loaded library by the name it was opened with, so
/// /proc/self/fd/N must not name another file while a library opened under that name is
/// still mapped: the private copy's descriptor is closed only once its library is gone
/// (one that stays mapped, e.g. RTLD_NODELETE, keeps its descriptor).
void release_copy_fd(int fd) noexcept {
    if (fd < 0) return;
    char name[32];
    std::snprintf(name, sizeof name, "/proc/self/fd/%d", fd);
    if (void* still = ::dlopen(name, RTLD_LAZY | RTLD_NOLOAD)) {
        ::dlclose(still);
        return;
    }
    ::close(fd);
}

/// The private copy's descriptor, which dlopen reads as /proc/self/fd/N.
struct CopyFd {
    int fd = -1;
    CopyFd() = default;
    ~CopyFd() { release_copy_fd(fd); }
    CopyFd(const CopyFd&) = delete;
    CopyFd& operator=(const CopyFd&) = delete;
};

/// Owns the library inside the handler's shared_ptr: the object is destroyed while its
/// code is still mapped, and only then is the library released (and then its copy's
/// descriptor).
struct DeleteThenUnload {
    boost::dll::shared_library library;
    int copy_fd = -1;
    void operator()(sdk::Handler* handler) noexcept {
        delete handler;
        library.unload();
        release_copy_fd(copy_fd);
    }
};


/// Unlinks the private copy on scope exit, through the directory it was created in; an
/// open mapping survives the unlink.
struct RemoveOnExit {
    int dir = -1;
    std::string name;
    ~RemoveOnExit() {
        if (dir >= 0 && !name.empty()) ::unlinkat(dir, name.c_str(), 0);
    }
};

/// Text chosen by the plugin (names, type names), made safe and short for one log line.
std::string shown(std::string_view text) {
    std::string out;
    for (const char c : text.substr(0, kMaxShownChars)) {
        out += (c >= 0x20 && c < 0x7f) ? c : '?';
    }
    if (text.size() > kMaxShownChars) out += "...";
    return out;
}

/// The C++ type of the exception being handled; never its what(), which may hold secrets.
std::string current_exception_type() {
    const std::type_info* type = abi::__cxa_current_exception_type();
    return type == nullptr ? std::string("unknown type") : shown(boost::core::demangle(type->name()));
}

/// Opens the private copy directory without following a symbolic link and checks, on the
/// open descriptor, that it is this user's and that no one else may write in it. A /tmp
/// cleaner can remove it and another local user re-create it under the same name: such a
/// directory is refused, never written to. One that is simply gone is made again (0700).
std::optional<std::string> open_private_dir(const fs::path& dir, UniqueFd& out) {
    out.reset(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (out.get() < 0 && errno == ENOENT) {
        if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
            return "cannot create the private copy directory " + dir.string() + ": " + errno_text(errno);
        }
        out.reset(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    }
    if (out.get() < 0) return "cannot open the private copy directory " + dir.string() + ": " + errno_text(errno);
    struct stat info {};
    if (::fstat(out.get(), &info) != 0) return "cannot stat the private copy directory: " + errno_text(errno);
    if (info.st_uid != ::geteuid() || (info.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(info.st_mode & 07777));
        return "the private copy directory " + dir.string() + " is not this user's alone (owner uid " +
               std::to_string(info.st_uid) + ", mode " + mode + "); refusing to load through it";
    }
    return std::nullopt;
}

/// The private copy and what holds it. Resource types neither copy nor move, so a stage
/// fills one the caller owns. Members are released in reverse: the copy's descriptor, then
/// its name (unlinked through the directory; an open mapping survives), then the directory.
struct PrivateCopy {
    UniqueFd dir{-1};     // the verified private copy directory
    RemoveOnExit remove;  // the copy's name in `dir`, once it exists
    CopyFd out;           // the copy, read-write; dlopen reads it as /proc/self/fd/N
    std::string sha256;   // of exactly the bytes copied
};

/// Copies the open file `in` (read from offset 0, so the caller's descriptor is the only
/// source) into a new file in the verified directory `copy.dir` named "<n>-<filename>",
/// taking the next n when a name is taken (another loader may share the directory).
/// Refuses anything but a regular file, so a FIFO or device cannot block or confuse the
/// copy. Leaves `copy.out` open on the copy and sets `copy.remove.name` once it exists.
std::optional<std::string> copy_to_private_dir(int in, const fs::path& from, unsigned long long& counter,
                                               PrivateCopy& copy) {
    struct stat info {};
    if (::fstat(in, &info) != 0) return "cannot stat it: " + errno_text(errno);
    if (!S_ISREG(info.st_mode)) return std::string("not a regular file");

    for (int tries = 0; copy.out.fd < 0; ++tries) {
        const std::string candidate = std::to_string(++counter) + "-" + from.filename().string();
        copy.out.fd = ::openat(copy.dir.get(), candidate.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (copy.out.fd >= 0) {
            copy.remove.name = candidate;
        } else if (errno != EEXIST || tries >= 1000) {
            return "cannot create a private copy: " + errno_text(errno);
        }
    }
    // The digest is of exactly the bytes copied, so it names the code that is loaded.
    const std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> digest(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
    if (!digest || EVP_DigestInit_ex(digest.get(), EVP_sha256(), nullptr) != 1) return std::string("cannot start its SHA-256");
    std::vector<char> buffer(std::size_t{1} << 16);
    for (off_t offset = 0;;) {
        const ssize_t got = ::pread(in, buffer.data(), buffer.size(), offset);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return "cannot read it: " + errno_text(errno);
        if (got == 0) break;
        offset += got;
        EVP_DigestUpdate(digest.get(), buffer.data(), static_cast<std::size_t>(got));
        for (ssize_t done = 0; done < got;) {
            const ssize_t put = ::write(copy.out.fd, buffer.data() + done, static_cast<std::size_t>(got - done));
            if (put < 0 && errno == EINTR) continue;
            if (put < 0) return "cannot write the private copy: " + errno_text(errno);
            done += put;
        }
    }
    if (::fsync(copy.out.fd) != 0) return "cannot write the private copy: " + errno_text(errno);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_length = 0;
    if (EVP_DigestFinal_ex(digest.get(), md, &md_length) != 1) return std::string("cannot finish its SHA-256");
    static constexpr char kHex[] = "0123456789abcdef";
    copy.sha256.clear();
    for (unsigned int i = 0; i < md_length; ++i) {
        copy.sha256 += kHex[md[i] >> 4];
        copy.sha256 += kHex[md[i] & 0x0f];
    }
    return std::nullopt;
}

/// dlopen maps segments without checking them against the file size, and touching a page
/// past the end of a truncated file is SIGBUS. Checks that every loadable segment lies
/// inside the file before dlopen sees it.
std::optional<std::string> check_elf_extent(const CopyFd& fd) {
    struct stat info {};
    if (::fstat(fd.fd, &info) != 0) return "cannot stat the private copy: " + errno_text(errno);
    const auto size = static_cast<std::uint64_t>(info.st_size);
    ElfW(Ehdr) header{};
    if (::pread(fd.fd, &header, sizeof header, 0) != static_cast<ssize_t>(sizeof header) ||
        std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0) {
        return std::string("it is not an ELF file");
    }
    constexpr unsigned char kNativeClass = sizeof(void*) == 8 ? ELFCLASS64 : ELFCLASS32;
    if (header.e_ident[EI_CLASS] != kNativeClass || header.e_phentsize != sizeof(ElfW(Phdr))) {
        return std::string("it is an ELF file for another architecture");
    }
    const std::uint64_t table_end =
        static_cast<std::uint64_t>(header.e_phoff) + std::uint64_t{header.e_phnum} * sizeof(ElfW(Phdr));
    if (table_end > size) return std::string("the file is truncated (program headers missing)");
    // The section header table is written last, so it also catches a copy cut short in
    // parts dlopen never reads (debug info): such a file is not what was deployed.
    const std::uint64_t sections_end =
        static_cast<std::uint64_t>(header.e_shoff) + std::uint64_t{header.e_shnum} * header.e_shentsize;
    if (header.e_shoff != 0 && sections_end > size) {
        return "the file is truncated (" + std::to_string(size) + " bytes, its section headers end at " +
               std::to_string(sections_end) + ")";
    }
    for (unsigned i = 0; i < header.e_phnum; ++i) {
        ElfW(Phdr) segment{};
        const auto offset = static_cast<off_t>(header.e_phoff + i * sizeof(ElfW(Phdr)));
        if (::pread(fd.fd, &segment, sizeof segment, offset) != static_cast<ssize_t>(sizeof segment)) {
            return std::string("cannot read its program headers");
        }
        if (segment.p_type == PT_LOAD &&
            static_cast<std::uint64_t>(segment.p_offset) + static_cast<std::uint64_t>(segment.p_filesz) > size) {
            return "the file is truncated (" + std::to_string(size) + " bytes, a segment ends at " +
                   std::to_string(segment.p_offset + segment.p_filesz) + ")";
        }
    }
    return std::nullopt;
}

/// dlerror() names missing symbols and libraries, which is the useful part; it also names
/// the private copy, which the operator never sees, so that prefix is dropped.
std::string load_error_text(const std::string& loaded_as) {
    const char* raw = ::dlerror();
    if (raw == nullptr) return "dlopen failed";
    std::string text(raw);
    const std::string prefix = loaded_as + ": ";
    if (text.rfind(prefix, 0) == 0) text.erase(0, prefix.size());
    if (text.size() > kMaxDlerrorChars) text = text.substr(0, kMaxDlerrorChars) + "...";
    return text;
}

/// Reads the manifest without trusting it: magic and struct_size first, then never more
/// than the plugin says it wrote (nor more than this host knows) and never past the
/// symbol's size when the ELF records one.
std::optional<std::string> copy_manifest(const void* symbol, outbox_plugin_manifest_t& manifest) {
    std::size_t symbol_size = 0;
    Dl_info info{};
    void* entry = nullptr;
    if (::dladdr1(symbol, &info, &entry, RTLD_DL_SYMENT) != 0 && entry != nullptr) {
        symbol_size = static_cast<const ElfW(Sym)*>(entry)->st_size;
    }
    constexpr std::size_t kHeader = offsetof(outbox_plugin_manifest_t, abi_kind);
    if (symbol_size != 0 && symbol_size < kHeader) {
        return "outbox_plugin_manifest is only " + std::to_string(symbol_size) +
               " bytes; build the plugin with OUTBOX_PLUGIN()";
    }
    manifest = outbox_plugin_manifest_t{};
    std::memcpy(&manifest, symbol, kHeader);
    if (manifest.magic != OUTBOX_MANIFEST_MAGIC) return std::nullopt;  // check_abi explains it

    constexpr std::size_t kIdentity = offsetof(outbox_plugin_manifest_t, abi_minor) + sizeof manifest.abi_minor;
    std::size_t readable = std::min<std::size_t>(manifest.struct_size, sizeof manifest);
    if (symbol_size != 0) readable = std::min(readable, symbol_size);
    if (readable < kIdentity) {
        return "outbox_plugin_manifest is truncated (" + std::to_string(manifest.struct_size) +
               " bytes); rebuild the plugin with OUTBOX_PLUGIN() from the outboxd SDK";
    }
    const std::uint32_t declared_size = manifest.struct_size;
    std::memcpy(&manifest, symbol, readable);
    manifest.struct_size = std::min<std::uint32_t>(declared_size, static_cast<std::uint32_t>(readable));
    return std::nullopt;
}

std::string bounded(const char* text, std::size_t capacity) { return std::string(text, ::strnlen(text, capacity)); }

/// The section of a plugin whose manifest names no handler: the one named like the file
/// ("name.so" or "libname.so"), if the config has it. Only this one section is used.
std::optional<std::string> section_by_file_name(const fs::path& file, const HandlerConfigs& configs) {
    // CMake names a MODULE target's file lib<target>.so, and targets use '_' where handler
    // names use '-' (libmission_log_forwarding.so serves mission-log-forwarding).
    const std::string stem = file.stem().string();
    std::vector<std::string> candidates{stem};
    if (stem.rfind("lib", 0) == 0) candidates.push_back(stem.substr(3));
    for (std::size_t i = 0, n = candidates.size(); i < n; ++i) {
        std::string dashed = candidates[i];
        std::replace(dashed.begin(), dashed.end(), '_', '-');
        if (dashed != candidates[i]) candidates.push_back(std::move(dashed));
    }
    for (const auto& candidate : candidates) {
        if (configs.contains(candidate)) return candidate;
    }
    return std::nullopt;
}

RejectedPlugin reject(const fs::path& file, const std::string& why) {
    return RejectedPlugin{file, file.filename().string() + ": " + why};
}

/// Why a stage refused the file: one sentence, which reject() prefixes with the file name.
struct Refusal {
    std::string reason;
};

/// A stage's outcome: what the next stage needs, or why the file is refused.
template <class T>
using Staged = std::variant<T, Refusal>;

/// The private copy, created, written and hashed through the verified directory's
/// descriptor. A file replaced or rewritten in place in the plugin directory then cannot
/// change code that is already mapped, and no name another user could swap is looked up.
std::optional<std::string> try_private_copy(const fs::path& configured_dir, const fs::path& file, int in,
                                            unsigned long long& counter, PrivateCopy& copy) {
    std::error_code ec;
    const fs::path private_dir = fs::absolute(configured_dir, ec);
    if (ec) return "cannot resolve the private copy directory: " + ec.message();
    if (auto bad = open_private_dir(private_dir, copy.dir)) return bad;
    copy.remove.dir = copy.dir.get();
    return copy_to_private_dir(in, file, counter, copy);
}

/// dlopen (rtld_now) of the copy through its descriptor, as /proc/self/fd/N, so
/// the bytes mapped are the ones copied and checked.
Staged<boost::dll::shared_library> try_open(const CopyFd& copy) {
    const std::string loaded_as = "/proc/self/fd/" + std::to_string(copy.fd);
    boost::dll::shared_library library;
    std::error_code ec;
    library.load(fs::path(loaded_as), boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local, ec);
    if (ec || !library.is_loaded()) return Refusal{"not a loadable shared library: " + load_error_text(loaded_as)};
    return library;
}

/// Plain C data first; no C++ symbol is touched until the ABI is known to match.
Staged<outbox_plugin_manifest_t> try_read_manifest(const boost::dll::shared_library& library) {
    if (!library.has(OUTBOX_MANIFEST_SYMBOL)) {
        return Refusal{"no " OUTBOX_MANIFEST_SYMBOL " symbol: not an outboxd plugin; build it with "
                       "OUTBOX_PLUGIN(YourHandler) from the outboxd SDK"};
    }
    outbox_plugin_manifest_t manifest{};
    if (auto bad = copy_manifest(&library.get<const unsigned char>(OUTBOX_MANIFEST_SYMBOL), manifest)) {
        return Refusal{*bad};
    }
    return manifest;
}

Staged<Factory*> try_factory(const boost::dll::shared_library& library) {
    if (!library.has(OUTBOX_FACTORY_SYMBOL)) {
        return Refusal{"no " OUTBOX_FACTORY_SYMBOL " symbol (the manifest alone is not a plugin); "
                       "build it with OUTBOX_PLUGIN(YourHandler)"};
    }
    // The symbol is a variable holding the factory's address (a Boost.DLL alias); read it as
    // a pointer rather than through get_alias so that a null one is refused, not called.
    Factory* const factory = library.get<Factory*>(OUTBOX_FACTORY_SYMBOL);
    if (factory == nullptr) return Refusal{OUTBOX_FACTORY_SYMBOL " is a null pointer; build it with OUTBOX_PLUGIN()"};
    return factory;
}

constexpr const char* kUnnamedHint =
    "; its manifest names no handler (built with the one-argument OUTBOX_PLUGIN or SDK 1.0), so its section is "
    "found by the file name: rebuild with OUTBOX_PLUGIN(Class, \"name\") or name the file lib<name>.so ('_' for '-' is accepted)";

/// The one config section a handler is constructed with.
struct Section {
    std::string promised;             // the manifest's handler name; empty when it names none
    std::optional<std::string> name;  // the handlers.<name> section used, when the config has it
    std::string config_json;          // that section, or "{}"
    std::string given;                // how messages name what the constructor was given
};

/// The section named by the manifest (OUTBOX_PLUGIN(Class, "name")), or for a
/// manifest without a name (the one-argument macro, SDK 1.0) by the file's name. No other
/// section is ever tried.
Staged<Section> try_choose_section(const outbox_plugin_manifest_t& manifest, const fs::path& file,
                                   const HandlerConfigs& configs) {
    Section section;
    section.promised = bounded(manifest.handler_name, sizeof manifest.handler_name);
    if (!section.promised.empty()) {
        if (!core::is_handler_name(section.promised)) {
            return Refusal{"the manifest's handler name '" + shown(section.promised) +
                           "' is invalid; rebuild with OUTBOX_PLUGIN(Class, \"name\") from the outboxd SDK"};
        }
        if (configs.contains(section.promised)) section.name = section.promised;
    } else {
        section.name = section_by_file_name(file, configs);
    }
    section.config_json = section.name ? configs.at(*section.name) : std::string("{}");
    section.given = section.name ? "its section handlers." + shown(*section.name) + ".config"
                                 : std::string("config {} (no handlers.<name>.config section)");
    return section;
}

/// `plugins check` without a config file: a handler that needs its section is not an error
/// there; it is reported without event types.
struct LeftUnconstructed {};

/// The factory is called exactly once, with the chosen section.
std::variant<std::unique_ptr<sdk::Handler>, LeftUnconstructed, Refusal> try_construct(Factory* factory,
                                                                                      const Section& section,
                                                                                      bool config_optional) {
    std::string error;  // the exception's type when the factory threw
    try {
        auto handler = factory(section.config_json);
        if (handler) return handler;
        error = "the factory returned a null handler";
    } catch (...) {
        error = current_exception_type();
    }
    if (!section.name && config_optional) return LeftUnconstructed{};
    return Refusal{"constructor threw an exception (" + error + ") with " + section.given +
                   (section.promised.empty() ? kUnnamedHint : "")};
}

/// The name the handler gives itself, which must be the one its section was chosen by.
Staged<std::string> try_handler_name(const sdk::Handler& handler, const Section& section,
                                     const HandlerConfigs& configs) {
    std::string name;
    try {
        name = handler.handler_name();
    } catch (...) {
        return Refusal{"handler_name() threw an exception (" + current_exception_type() + ")"};
    }
    const std::string& promised = section.promised;
    if (!promised.empty() && name != promised) {
        return Refusal{"OUTBOX_PLUGIN names the handler '" + shown(promised) + "' but handler_name() returns '" +
                       shown(name) + "'; make them the same"};
    }
    if (promised.empty() && section.name && name != *section.name) {
        return Refusal{"constructed with handlers." + shown(*section.name) +
                       ".config (chosen by the file name) but handler_name() returns '" + shown(name) +
                       "'; rename the file or rebuild with OUTBOX_PLUGIN(Class, \"" + shown(name) + "\")"};
    }
    if (promised.empty() && !section.name) {
        const auto own = configs.find(name);
        if (own != configs.end() && own->second != "{}") {
            return Refusal{"handler '" + shown(name) + "' has a handlers." + shown(name) +
                           ".config section but was constructed with {}" + kUnnamedHint};
        }
    }
    if (!core::is_handler_name(name)) {
        return Refusal{"handler_name '" + shown(name) +
                       "' is invalid: use 1-100 characters of a-z, 0-9, '.', '_', '-', starting with a "
                       "letter or digit"};
    }
    return name;
}

/// The event types the handler declares, valid and without duplicates.
Staged<std::vector<std::string>> try_event_types(const sdk::Handler& handler, const std::string& name) {
    std::vector<std::string> event_types;
    try {
        event_types = handler.event_types();
    } catch (...) {
        return Refusal{"event_types() of handler '" + name + "' threw an exception (" + current_exception_type() + ")"};
    }
    if (event_types.empty()) return Refusal{"handler '" + name + "' declares no event types"};
    std::set<std::string> seen;
    std::vector<std::string> unique_types;
    for (auto& type : event_types) {
        if (!core::is_event_type(type)) {
            return Refusal{"handler '" + name + "' declares an invalid event type '" + shown(type) +
                           "': use 1-100 letters and digits starting with an upper-case letter"};
        }
        // A duplicate would otherwise make a dispatcher run the handler twice per event.
        if (seen.insert(type).second) unique_types.push_back(std::move(type));
    }
    return unique_types;
}

/// The handler's shared_ptr owns the library and the copy's descriptor from here on.
std::shared_ptr<sdk::Handler> share(std::unique_ptr<sdk::Handler> handler, boost::dll::shared_library& library,
                                    CopyFd& copy) {
    sdk::Handler* raw = handler.release();
    return std::shared_ptr<sdk::Handler>(raw, DeleteThenUnload{std::move(library), std::exchange(copy.fd, -1)});
}

}  // namespace

PluginLoader::PluginLoader(std::filesystem::path private_dir, LoaderOptions options)
    : private_dir_(std::move(private_dir)), options_(options) {}

LoadResult PluginLoader::load_file(const std::filesystem::path& file, const HandlerConfigs& configs) {
    UniqueFd in(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (in.get() < 0) {
        if (errno == ENOENT) return reject(file, "no such file");
        return reject(file, "cannot open it: " + errno_text(errno));
    }
    return load_open_file(file, in.get(), configs);
}

LoadResult PluginLoader::load_open_file(const std::filesystem::path& file, int fd, const HandlerConfigs& configs) try {
    // Declaration order is the lifetime rule: the library is declared after the copy, so it
    // is unloaded before the copy's descriptor is released, and every plugin object after
    // the library, so it is destroyed while the library's code is still mapped.
    PrivateCopy copy;
    if (auto bad = try_private_copy(private_dir_, file, fd, copies_, copy)) return reject(file, *bad);
    if (auto bad = check_elf_extent(copy.out)) return reject(file, "not a loadable shared library: " + *bad);
    auto opened = try_open(copy.out);
    if (const auto* bad = std::get_if<Refusal>(&opened)) return reject(file, bad->reason);
    auto& library = std::get<boost::dll::shared_library>(opened);

    const auto read = try_read_manifest(library);
    if (const auto* bad = std::get_if<Refusal>(&read)) return reject(file, bad->reason);
    const auto& manifest = std::get<outbox_plugin_manifest_t>(read);
    const core::AbiVerdict verdict = core::check_abi(manifest, core::host_manifest());
    if (!verdict.compatible) return reject(file, verdict.reason);
    const std::string abi = core::describe_abi(manifest);
    const auto resolved = try_factory(library);
    if (const auto* bad = std::get_if<Refusal>(&resolved)) return reject(file, bad->reason);

    const auto chosen = try_choose_section(manifest, file, configs);
    if (const auto* bad = std::get_if<Refusal>(&chosen)) return reject(file, bad->reason);
    const auto& section = std::get<Section>(chosen);
    auto made = try_construct(std::get<Factory*>(resolved), section, options_.config_optional);
    if (const auto* bad = std::get_if<Refusal>(&made)) return reject(file, bad->reason);
    if (std::holds_alternative<LeftUnconstructed>(made)) {
        return LoadedPlugin{file, section.promised, {}, abi, nullptr, copy.sha256};
    }
    auto& handler = std::get<std::unique_ptr<sdk::Handler>>(made);
    auto named = try_handler_name(*handler, section, configs);
    if (const auto* bad = std::get_if<Refusal>(&named)) return reject(file, bad->reason);
    auto& name = std::get<std::string>(named);
    auto declared = try_event_types(*handler, name);
    if (const auto* bad = std::get_if<Refusal>(&declared)) return reject(file, bad->reason);

    return LoadedPlugin{file, std::move(name), std::move(std::get<std::vector<std::string>>(declared)), abi,
                        share(std::move(handler), library, copy.out), std::move(copy.sha256)};
} catch (...) {
    // Only host-side failures (allocation, filesystem) get here; plugin calls catch their own.
    return reject(file, "unexpected error while loading (" + current_exception_type() + ")");
}

}  // namespace outbox::plugin
