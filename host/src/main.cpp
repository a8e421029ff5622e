#include <cstdio>
#include <exception>
#include <memory>
#include <string>

#include "admin/admin_server.hpp"
#include "app/cli.hpp"
#include "app/host.hpp"

namespace {

// The composition root's one HTTP piece: the admin server as the host's listener.
class AdminListener final : public outbox::app::AdminListener {
public:
    AdminListener(outbox::admin::AdminOptions options, outbox::metrics::Metrics& metrics,
                  outbox::app::HandlerSource handlers)
        : server_(std::move(options), metrics, std::move(handlers)) {}
    void stop() override { server_.stop(); }
    void start() {
        try {
            server_.start();
        } catch (const outbox::admin::AdminStartError& e) {
            throw outbox::app::StartError(1, e.what());
        }
    }

private:
    outbox::admin::AdminServer server_;
};

outbox::app::StartAdmin prepare_admin(const outbox::config::Config& config, const std::string& host_id) {
    return [options = outbox::admin::AdminOptions::from(config, host_id)](outbox::metrics::Metrics& metrics,
                                                                          outbox::app::HandlerSource handlers) {
        auto listener = std::make_unique<AdminListener>(options, metrics, std::move(handlers));
        listener->start();
        return std::unique_ptr<outbox::app::AdminListener>(std::move(listener));
    };
}

}  // namespace

// Anything that escapes the commands (a temporary directory that cannot be created, memory
// exhausted) ends the process with one line and exit code 1, never std::terminate.
int main(int argc, char** argv) {
    try {
        return outbox::app::run_cli(argc, argv, prepare_admin);
    } catch (const std::exception& error) {
        std::string line(error.what());
        for (char& c : line) {
            if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
        }
        std::fprintf(stderr, "outboxd: fatal: %.300s\n", line.c_str());
    } catch (...) {
        std::fprintf(stderr, "outboxd: fatal: unknown error\n");
    }
    return 1;
}
