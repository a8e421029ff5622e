#!/usr/bin/env bash
# Builds outboxd with warnings as errors and all test tiers, starts a throwaway PostgreSQL
# on a free loopback port, and runs the tests with CTest. Arguments go to ctest, e.g.
#   scripts/test.sh -L unit        scripts/test.sh -R integration -V
# OUTBOX_BUILD_DIR overrides the build directory (default: build/). Exits with ctest's status.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${OUTBOX_BUILD_DIR:-$root/build}

"$root/scripts/install-deps.sh"

cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DOUTBOX_WERROR=ON -DOUTBOX_BUILD_TESTS=ON
cmake --build "$build_dir" -j"$(nproc)"

# Under /tmp: the postgres user must reach it, and the socket path must stay short.
pg_dir=$(mktemp -d /tmp/outbox-pg.XXXXXX)
trap '"$root/scripts/pg.sh" stop "$pg_dir" || true' EXIT
port=$("$root/scripts/pg.sh" free-port)
OUTBOX_TEST_DATABASE_URL=$("$root/scripts/pg.sh" start "$pg_dir" "$port")
export OUTBOX_TEST_DATABASE_URL
echo "test.sh: PostgreSQL at $OUTBOX_TEST_DATABASE_URL" >&2

status=0
ctest --test-dir "$build_dir" --output-on-failure "$@" || status=$?
exit "$status"
