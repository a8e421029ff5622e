#pragma once
// The outboxd handler SDK. A plugin includes this header, derives from
// outbox::sdk::Handler and ends one .cpp with OUTBOX_PLUGIN(MyHandler, "my-handler"). Build it with
// nothing but these headers, nlohmann_json and a C++20 compiler:
//
//   g++ -std=c++20 -shared -fPIC -I<sdk>/include my_handler.cpp -o libmy_handler.so
//
// or, with CMake, find_package(OutboxSdk) and outbox_add_plugin(my_handler SOURCES ...).

#include "outbox/sdk/abi.hpp"
#include "outbox/sdk/context.hpp"
#include "outbox/sdk/errors.hpp"
#include "outbox/sdk/event.hpp"
#include "outbox/sdk/handler.hpp"
#include "outbox/sdk/plugin.hpp"
