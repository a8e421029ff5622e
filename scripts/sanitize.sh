#!/usr/bin/env bash
# Builds the tests with sanitizers and runs them against a throwaway PostgreSQL:
#   scripts/sanitize.sh asan   AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/):
#                              the unit and integration tiers
#   scripts/sanitize.sh tsan   ThreadSanitizer (build-tsan/): the concurrency tests, i.e. the
#                              worker runtime (claims, heartbeat, rescue, shutdown), the fleet
#                              limiter and registry, the plugin directory watcher, commit
#                              groups, and the quarantine of poison events (real outboxd hosts crashing), and
#                              the unit tests of the work queue, in-flight call states, bounded
#                              task queue and shared results, in one executable of their own
#                              (outbox_concurrency_tests)
# Every process the tests start (outboxd hosts included) writes its sanitizer reports to
# <build>/sanitizer-reports/; the stage fails when a test fails or any report was written.
# Only the test targets are built, at -O1 with line tables, with only the sample plugin the
# integration tier loads, to keep CI fast. OUTBOX_SANITIZE_BUILD_DIR overrides the build directory.
#   scripts/sanitize.sh asan --build-only   builds and stops (scripts/test.sh builds both
#                                           sanitizers while other stages run)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mode=${1:-}
build_only=false
[[ "${2:-}" == --build-only ]] && build_only=true
case "$mode" in
  asan)
    sanitize=address,undefined
    targets=(outbox_unit_tests outbox_integration_tests)
    # The integration tier's circuit-breaker tests load the mission-log-forwarding sample plugin.
    plugins=ON
    ;;
  tsan)
    sanitize=thread
    targets=(outbox_concurrency_tests)
    plugins=OFF
    ;;
  *)
    echo "usage: scripts/sanitize.sh asan|tsan" >&2
    exit 2
    ;;
esac
build_dir=${OUTBOX_SANITIZE_BUILD_DIR:-$root/build-$mode}
reports=$build_dir/sanitizer-reports

"$root/scripts/install-deps.sh"
# shellcheck source=scripts/ccache.sh
source "$root/scripts/ccache.sh"
cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-O1 -g1" \
  -DOUTBOX_SANITIZE="$sanitize" -DOUTBOX_BUILD_TESTS=ON -DOUTBOX_BUILD_PLUGINS=$plugins "${launcher[@]}" >/dev/null
cmake --build "$build_dir" -j"$(nproc)" --target "${targets[@]}"
if $build_only; then
  exit 0
fi

rm -rf "$reports"
mkdir -p "$reports"
# Suppressions, for uninstrumented third-party libraries only, each with its reason.
cat >"$build_dir/lsan.supp" <<'SUPP'
# libpqxx 6.4: a BEGIN sent on a connection the server already closed throws
# broken_connection ("Could not obtain client encoding") before wrapping libpq's error
# PGresult, which is never freed. Reproduced without outboxd code; 2 KiB per dead connection.
# Matched by libpq's allocator because the fast unwinder stops in libpqxx (no frame
# pointers); outboxd never calls libpq directly, so only libpqxx's results match.
leak:PQmakeEmptyPGresult
SUPP
# Reports go to files so that those of child processes are not lost in their logs.
export ASAN_OPTIONS="log_path=$reports/asan:detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1"
export LSAN_OPTIONS="suppressions=$build_dir/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="log_path=$reports/ubsan:print_stacktrace=1:halt_on_error=1"
export TSAN_OPTIONS="log_path=$reports/tsan:second_deadlock_stack=1:halt_on_error=0"

pg_dir=$(mktemp -d /tmp/outbox-pg.XXXXXX)
trap '"$root/scripts/pg.sh" stop "$pg_dir" || true' EXIT
OUTBOX_TEST_DATABASE_URL=$("$root/scripts/pg.sh" start "$pg_dir" "$("$root/scripts/pg.sh" free-port)" --non-durable)
export OUTBOX_TEST_DATABASE_URL

status=0
if [[ "$mode" == asan ]]; then
  # By name: the sample plugins' own tests carry these labels too, and are not built here.
  ctest --test-dir "$build_dir" --output-on-failure -R '^(unit|integration|integration_at_scale)$' || status=$?
else
  # The tests that run hosts, workers, heartbeats, limiters, deadlines and watchers
  # concurrently (tests/CMakeLists.txt, outbox_concurrency_tests). Every suite named must
  # still exist: a renamed suite fails the stage instead of silently dropping out of it.
  binary=$build_dir/tests/outbox_concurrency_tests
  for suite in Worker Deadline FleetLimiter FleetRegistry HotPlugins Quarantine CommitGroup \
    WorkQueue InFlightCall InFlightTable BoundedTaskQueueTest SharedResult; do
    if ! "$binary" --gtest_list_tests --gtest_filter="$suite.*" | grep -q '^  '; then
      echo "sanitize.sh: no test in suite $suite; update the TSan list" >&2
      status=1
    fi
  done
  "$binary" --gtest_color=no || status=$?
fi

if compgen -G "$reports/*" >/dev/null; then
  for report in "$reports"/*; do
    echo "=== $report" >&2
    cat "$report" >&2
  done
  echo "sanitize.sh: $mode found problems (reports above, kept in $reports)" >&2
  status=1
fi
exit "$status"
