#pragma once
// A property a fuzz target checks: on violation, say which and abort, so libFuzzer saves the input.

#include <cstdio>
#include <cstdlib>

#define OUTBOX_FUZZ_CHECK(condition, what)                                                    \
    do {                                                                                      \
        if (!(condition)) {                                                                   \
            std::fprintf(stderr, "fuzz property violated: %s (%s)\n", what, #condition);      \
            std::abort();                                                                     \
        }                                                                                     \
    } while (false)
