#!/usr/bin/env bash
# Documentation tasks.
#   scripts/docs.sh regen   builds outboxd and rewrites the configuration reference in
#                           docs/operations.md from `outboxd config reference`
#   scripts/docs.sh check   builds what the checks need and runs them (CTest label docs):
#                           links and anchors, the configuration reference, and the SQL and
#                           C++ examples (needs OUTBOX_TEST_DATABASE_URL, or starts its own
#                           throwaway PostgreSQL)
# OUTBOX_BUILD_DIR overrides the build directory (default: build/).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${OUTBOX_BUILD_DIR:-$root/build}

configure() {
  if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
    cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DOUTBOX_WERROR=ON -DOUTBOX_BUILD_TESTS=ON
  fi
}

case "${1:-}" in
  regen)
    configure
    cmake --build "$build_dir" -j"$(nproc)" --target outboxd
    python3 "$root/scripts/docs_config_reference.py" write "$build_dir/host/outboxd" "$root/docs/operations.md"
    ;;
  check)
    configure
    cmake --build "$build_dir" -j"$(nproc)" --target outboxd outbox_docs_tests
    if [[ -z "${OUTBOX_TEST_DATABASE_URL:-}" ]]; then
      pg_dir=$(mktemp -d /tmp/outbox-pg.XXXXXX)
      trap '"$root/scripts/pg.sh" stop "$pg_dir" || true' EXIT
      OUTBOX_TEST_DATABASE_URL=$("$root/scripts/pg.sh" start "$pg_dir" "$("$root/scripts/pg.sh" free-port)")
      export OUTBOX_TEST_DATABASE_URL
    fi
    ctest --test-dir "$build_dir" --output-on-failure -L docs
    ;;
  *)
    echo "usage: scripts/docs.sh regen | check" >&2
    exit 2
    ;;
esac
