#include "app/descriptor_limit.hpp"

#include <sys/resource.h>

#include <filesystem>
#include <string>
#include <system_error>

#include "app/host.hpp"

namespace outbox::app {
namespace {

// The transport's probe-only places (TransportOptions::probe_connections) and its listener.
constexpr std::uint64_t kProbePlaces = 64 + 1;
// Bookkeeping sessions (the operator jobs' runner among them), the wake-up listener, the
// admin probes' pool, the fleet limiter and the systemd status connection
// (docs/high-availability.md, "Connections"), besides the handler pool and the admin API's.
constexpr std::uint64_t kFixedDatabaseConnections = 16;
// Logs, standard streams, the private plugin copies being loaded, inotify and the like.
constexpr std::uint64_t kMargin = 64;

std::uint64_t count_plugin_files(const std::string& dir) {
    std::error_code ec;
    std::uint64_t files = 0;
    for (auto it = std::filesystem::directory_iterator(dir, ec); !ec && it != std::filesystem::directory_iterator();
         it.increment(ec)) {
        ++files;
    }
    return files;
}

}  // namespace

std::uint64_t descriptors_needed(const config::Config& config, std::uint64_t plugin_files) {
    const std::uint64_t admin =
        config.admin.listen_address ? static_cast<std::uint64_t>(config.admin.max_connections) + kProbePlaces : 0;
    const std::uint64_t database = kFixedDatabaseConnections + static_cast<std::uint64_t>(config.database.pool_size) +
                                   static_cast<std::uint64_t>(config.admin.db_connections);
    // A handler call may hold a socket or two of its own (an HTTP client, a broker).
    const std::uint64_t handlers = 2 * static_cast<std::uint64_t>(config.outbox.concurrency);
    return admin + database + 2 * plugin_files + handlers + kMargin;
}

std::uint64_t ensure_descriptor_limit(const config::Config& config) {
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
    if (limit.rlim_cur < limit.rlim_max) {
        rlimit raised = limit;
        raised.rlim_cur = limit.rlim_max;
        if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
    }
    const std::uint64_t needed = descriptors_needed(config, count_plugin_files(config.plugins.dir));
    if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < needed) {
        throw StartError(2, "the open-file limit is " + std::to_string(limit.rlim_cur) + " (hard limit " +
                                std::to_string(limit.rlim_max) + ") but this configuration needs " +
                                std::to_string(needed) +
                                " descriptors (admin.max_connections, database.pool_size, outbox.concurrency, "
                                "plugins): raise it (systemd: LimitNOFILE=; a shell: ulimit -n) or lower "
                                "admin.max_connections");
    }
    return limit.rlim_cur;
}

}  // namespace outbox::app
