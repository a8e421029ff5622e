// admin-stats-server: the example stats admin server, deduplicating by Idempotency-Key,
// with injectable faults including "processed but the response was lost".
//   admin-stats-server --port 8082 --rate-409 0.05 --rate-lost-drop 0.02
#include "outbox_examples/admin_stats_server.hpp"
#include "service_main.hpp"

int main(int argc, char** argv) {
    using namespace outbox::examples;
    CLI::App app{"Example stats admin server: POST /api/stats/mission-log; GET /api/stats/users"};
    ServiceFlags flags;
    flags.port = 8082;
    flags.stall_ms = 6000;  // past the plugin's default 5s timeout
    app.add_option("--port", flags.port, "port on 127.0.0.1 (0: any free port)")->capture_default_str();
    add_fault_flags(app, flags);
    try {
        app.parse(argc, argv);
        finish_flags(flags);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }

    const sigset_t signals = block_stop_signals();
    try {
        AdminStatsServer server(flags.faults);
        server.start(flags.port);
        std::cout << "admin-stats-server listening on " << server.base_url() << std::endl;
        wait_for_stop_signal(signals);
        server.stop();
        std::cout << "admin-stats-server stopped: " << server.total() << " missions counted for "
                  << server.user_counts().size() << " users, " << server.replayed() << " replays answered from the "
                  << "idempotency store, " << server.in_progress_conflicts() << " in-progress conflicts" << std::endl;
    } catch (const std::exception& e) {
        std::cerr << "admin-stats-server: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
