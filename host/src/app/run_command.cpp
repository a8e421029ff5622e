#include <algorithm>
#include <condition_variable>
#include <csignal>
#include <iostream>
#include <mutex>
#include <optional>
#include <thread>

#include <pthread.h>
#include <signal.h>

#include "app/commands.hpp"
#include "app/descriptor_limit.hpp"
#include "app/host.hpp"
#include "app/systemd_notifier.hpp"
#include "db/db_error.hpp"
#include "db/migrator.hpp"
#include "registry/event_types.hpp"
#include "log/log.hpp"

namespace outbox::app {
namespace {
// After outbox.shutdown_timeout a stop still cancels running calls (5 s), abandons what
// ignores that, lets bookkeeping calls finish (each bounded by the connection timeouts)
// and stores the outcomes (5 s); this is how long all that may take.
std::chrono::milliseconds stop_margin(const config::Config& config) {
    return std::chrono::seconds{15} + 2 * config.database.call_timeout + config.database.connect_timeout;
}

/// The one thread that takes SIGINT, SIGTERM and SIGHUP (blocked everywhere else): SIGHUP
/// rescans the plugins; the first stop signal (or the host stopping on its own) ends it.
void take_signals(const sigset_t& signals, Host& host, std::stop_source& stopping) {
    int received = 0;
    while (sigwait(&signals, &received) == 0) {
        if (received == SIGHUP) {
            log::info("received SIGHUP: rescanning the plugin directory");
            host.rescan();
            continue;
        }
        if (!stopping.stop_requested()) {
            log::info(std::string("received ") + (received == SIGTERM ? "SIGTERM" : "SIGINT") +
                      ": stopping claims and draining in-flight work");
        }
        stopping.request_stop();
        return;
    }
}

/// A stop that overruns its bound (outbox.shutdown_timeout for handlers, then the cancel
/// grace and storing outcomes) is itself a hang: end the process with code 3. Once the
/// handlers are done, what is left only writes to the database (outcomes, giving back, the
/// host's row): it gets until outbox.shutdown_timeout, and at least kStoreGrace after the
/// handlers unless the database is known to be unreachable. Writes that could not reach the
/// database by then are left to lease expiry (their events run again), and the exit code is
/// the handlers' (review item 9).
void watch_the_stop(Host& host, std::chrono::steady_clock::time_point began, const config::Config& config,
                    std::stop_token done) {
    constexpr auto kStoreGrace = std::chrono::seconds{2};
    const auto shutdown = config.outbox.shutdown_timeout;
    const auto margin = stop_margin(config);
    std::mutex mutex;
    std::condition_variable_any cv;
    std::unique_lock lock(mutex);
    std::optional<std::chrono::steady_clock::time_point> settled_at;
    while (!done.stop_requested()) {
        const auto now = std::chrono::steady_clock::now();
        if (now >= began + shutdown + margin) {
            log::error("stopping took longer than outbox.shutdown_timeout plus " +
                       std::to_string(std::chrono::duration_cast<std::chrono::seconds>(margin).count()) +
                       "s; exiting with code 3");
            spdlog::default_logger_raw()->flush();
            std::_Exit(3);
        }
        if (const auto settled = host.handlers_settled()) {
            if (!settled_at) settled_at = now;
            const auto grace = settled->database_down ? std::chrono::seconds{0} : kStoreGrace;
            if (now >= std::max(began + shutdown, *settled_at + grace)) {
                log::warn("the database did not take this host's last writes within outbox.shutdown_timeout; "
                          "outcomes not stored are left to lease expiry and their events run again");
                log::info(settled->exit_code == 0 ? "outboxd stopped"
                                                  : "outboxd stopped with handler threads still running (exit code 3)");
                spdlog::default_logger_raw()->flush();
                std::_Exit(settled->exit_code);
            }
        }
        cv.wait_for(lock, done, std::chrono::milliseconds{50}, [] { return false; });
    }
}
}  // namespace

int run_command(const config::Config& config, bool migrate_first, const AdminFactory& admin) {
    try {
        ensure_descriptor_limit(config);
    } catch (const StartError& e) {
        std::cerr << "outboxd: " << e.what() << "\n";
        return e.exit_code();
    }
    // Signals are taken by sigwait on one thread only; every thread started below inherits
    // the blocked mask.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);

    std::stop_source stopping;
    SystemdNotifier notifier;  // no-op unless systemd (NOTIFY_SOCKET) started this process
    Host host(config, Host::Options{migrate_first, [&stopping] { stopping.request_stop(); }, &notifier, admin});
    std::jthread signal_thread([&] { take_signals(signals, host, stopping); });
    // The signal thread leaves on the first SIGTERM/SIGINT; when the host stops on its own
    // (or start-up throws), it is sent one.
    struct SignalThreadRelease {
        std::stop_source& stopping;
        std::jthread& thread;
        ~SignalThreadRelease() {
            stopping.request_stop();
            pthread_kill(thread.native_handle(), SIGTERM);
            thread.join();
        }
    } release_signal_thread{stopping, signal_thread};

    try {
        if (!host.start(stopping.get_token())) {
            log::info("stopped during start-up");
            return host.stop();
        }
    } catch (const StartError& e) {
        // StartError's text is outboxd's own, composed where start-up failed.
        const std::string message = e.what();
        if (e.exit_code() == 2) {
            std::cerr << "outboxd: " << message << "\n";
        } else {
            log::error(message);
        }
        host.stop();
        return e.exit_code();
    }

    {
        std::mutex mutex;
        std::condition_variable_any cv;
        std::unique_lock lock(mutex);
        cv.wait(lock, stopping.get_token(), [] { return false; });
    }
    notifier.stopping();
    std::jthread stop_watchdog([&host, began = std::chrono::steady_clock::now(), &config](std::stop_token done) {
        watch_the_stop(host, began, config, done);
    });
    const int code = host.stop();
    stop_watchdog.request_stop();
    stop_watchdog.join();
    log::info(code == 0 ? "outboxd stopped" : "outboxd stopped with handler threads still running (exit code 3)");
    spdlog::default_logger_raw()->flush();
    // After 3 the host must not be destroyed: its stuck threads still use it.
    if (code != 0) std::_Exit(code);
    return 0;
}

int migrate_command(const config::Config& config, const db::RoleNames& roles, bool offline,
                    std::optional<bool> require_registered_types) {
    try {
        std::stop_source never;
        auto conn = connect_at_start_up(config, never.get_token(), migration_url(config));
        const auto applied = db::Migrator().migrate(*conn, roles, db::MigrateOptions{.allow_offline = offline, .lock_wait = config.database.startup_timeout});
        if (applied.empty()) std::cout << "schema is up to date\n";
        for (const auto& m : applied) {
            std::cout << "applied " << m.file_name << " in " << m.duration_ms << " ms\n";
        }
        if (!roles.runtime.empty()) std::cout << "granted the runtime role " << roles.runtime << "\n";
        if (!roles.publisher.empty()) std::cout << "granted the publisher role " << roles.publisher << "\n";
        // outbox_publish() runs in applications, which do not read this configuration.
        report_setting(registry::set_require_registered_types(
            *conn, requested_require_registered_types(config, require_registered_types), cli_actor()));
        return 0;
    } catch (const db::MigrationRefused& e) {
        std::cerr << "outboxd migrate: " << e.what() << "\n";
        return 4;
    } catch (const db::RoleError& e) {
        std::cerr << "outboxd migrate: " << e.what() << "\n";
        return 2;
    } catch (const db::MigrationError& e) {
        std::cerr << "outboxd migrate: " << e.what() << "\n";
        return 1;
    } catch (const StartError& e) {
        std::cerr << "outboxd migrate: " << e.what() << "\n";
        return e.exit_code();
    } catch (const std::exception&) {
        std::cerr << "outboxd migrate: cannot reach the database: "
                  << db::classify_db_error(std::current_exception()).describe()
                  << "; check database.url / OUTBOX_DATABASE_URL\n";
        return 1;
    }
}

}  // namespace outbox::app
