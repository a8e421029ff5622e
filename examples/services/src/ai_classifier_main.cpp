// ai-classifier: the example AI classification API, with injectable faults and a rate limit.
//   AI_API_KEY=demo ai-classifier --port 8081 --rate-limit 5 --rate-503 0.05
#include <cstdlib>

#include "outbox_examples/ai_classifier_server.hpp"
#include "service_main.hpp"

int main(int argc, char** argv) {
    using namespace outbox::examples;
    CLI::App app{"Example AI classifier: POST /v1/classify {\"domain\"} -> {\"category\"}; GET /v1/stats"};
    ServiceFlags flags;
    flags.port = 8081;
    flags.stall_ms = 11000;  // past the plugin's default 10s timeout
    std::string api_key_env = "AI_API_KEY";
    app.add_option("--port", flags.port, "port on 127.0.0.1 (0: any free port)")->capture_default_str();
    app.add_option("--api-key-env", api_key_env, "environment variable holding the accepted Bearer key")
        ->capture_default_str();
    add_fault_flags(app, flags);
    try {
        app.parse(argc, argv);
        finish_flags(flags);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    const char* key = std::getenv(api_key_env.c_str());
    if (key == nullptr || *key == '\0') {
        std::cerr << "ai-classifier: environment variable " << api_key_env << " is not set\n";
        return 2;
    }

    const sigset_t signals = block_stop_signals();
    try {
        AiClassifierServer server(key, flags.faults);
        server.start(flags.port);
        std::cout << "ai-classifier listening on " << server.base_url() << std::endl;
        wait_for_stop_signal(signals);
        server.stop();
        std::cout << "ai-classifier stopped after " << server.call_count() << " calls, busiest second "
                  << server.max_calls_in_window(std::chrono::seconds{1}) << " calls" << std::endl;
    } catch (const std::exception& e) {
        std::cerr << "ai-classifier: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
