#include <cstdio>
#include <exception>
#include <string>

#include "app/cli.hpp"

// Anything that escapes the commands (a temporary directory that cannot be created, memory
// exhausted) ends the process with one line and exit code 1, never std::terminate.
int main(int argc, char** argv) {
    try {
        return outbox::app::run_cli(argc, argv);
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
