#include "app/cli.hpp"

int main(int argc, char** argv) { return outbox::app::run_cli(argc, argv); }
