#!/usr/bin/env bash
# Builds outboxd with warnings as errors and all test tiers, starts a throwaway PostgreSQL
# on a free loopback port, and runs the tests with CTest. Arguments go to ctest, e.g.
#   scripts/test.sh -L unit        scripts/test.sh -R integration -V
# The `hostile` label (tests/hostile, about 10 s) attacks a real `outboxd run` child's admin
# listener: scripts/test.sh -L hostile.
# The `browser` label (tests/browser, about a minute, bounded at 5) drives the operator
# console in headless Chromium against a real `outboxd run`; its screenshots are left in
# <build>/browser-artifacts: scripts/test.sh -L browser.
# The `failover` label (tests/failover) kills a primary under three hosts and promotes its
# standby: scripts/test.sh -L failover.
# Without arguments (as CI runs it) every tier runs (scripts/tiers.sh: the fault tier beside
# the others; the integration tier's main entry only under ASan+UBSan, below), then the
# rolling-upgrade test (scripts/upgrade-test.sh on this build), the PgBouncer tier (ctest -L
# pgbouncer, bounded to 7 minutes), the failover test (ctest -L failover, bounded to 7
# minutes), the benchmark's smoke run (bench/run.sh --quick on this build),
# scripts/check-observability.sh, scripts/package-test.sh (the Debian packages built,
# linted, installed, upgraded and purged), scripts/sanitize.sh asan, then tsan with
# scripts/fuzz.sh beside it (scripts/tsan-and-fuzz.sh). The sanitizer and fuzzer builds run
# in the background, at the lowest CPU priority, from the end of the main build on. Every
# stage runs and is bounded; any failure fails the script; at the end it prints how long
# each stage took.
# OUTBOX_BUILD_DIR overrides the build directory (default: build/).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${OUTBOX_BUILD_DIR:-$root/build}

"$root/scripts/install-deps.sh"

# shellcheck source=scripts/ccache.sh
source "$root/scripts/ccache.sh"
# Busy CPU-seconds of the whole machine so far (every core, background builds included),
# from /proc/stat's clock ticks: the summary says how busy each stage kept the cores.
cpu_busy() {
  awk -v hz="$(getconf CLK_TCK)" '/^cpu / { printf "%d\n", ($2 + $3 + $4 + $7 + $8 + $9) / hz }' /proc/stat
}
busy_at_start=$(cpu_busy)
build_started=$SECONDS
cmake -S "$root" -B "$build_dir" "${build_flags[@]}" -DOUTBOX_WERROR=ON -DOUTBOX_BUILD_TESTS=ON "${launcher[@]}"
cmake --build "$build_dir" -j"$(nproc)"
durations=("build: $((SECONDS - build_started)) s, CPU busy $(($(cpu_busy) - busy_at_start)) s")

# Under /tmp: the postgres user must reach it, and the socket path must stay short.
pg_dir=$(mktemp -d /tmp/outbox-pg.XXXXXX)
trap '"$root/scripts/pg.sh" stop "$pg_dir" || true' EXIT
port=$("$root/scripts/pg.sh" free-port)
OUTBOX_TEST_DATABASE_URL=$("$root/scripts/pg.sh" start "$pg_dir" "$port" --non-durable)
export OUTBOX_TEST_DATABASE_URL
echo "test.sh: PostgreSQL at $OUTBOX_TEST_DATABASE_URL" >&2

status=0
if (($#)); then
  ctest --test-dir "$build_dir" --output-on-failure "$@" || status=$?
  exit "$status"
fi
failed=()
# Every stage is bounded: a hung stage is killed (TERM, then KILL 30 s later) and counted
# as failed, so the whole command always ends. Its output is kept too, and a failed stage's
# end is printed again after the last stage: a CI log keeps only its tail, and the reason a
# stage failed would otherwise sit under the output of every stage after it.
stage_logs=$(mktemp -d /tmp/outbox-stages.XXXXXX)
failed_logs=()
stage() {
  local limit=$1
  shift
  echo "test.sh: $*" >&2
  stage_count=$((stage_count + 1))
  local log="$stage_logs/$stage_count.log"
  local code=0
  local started=$SECONDS busy
  busy=$(cpu_busy)
  timeout -k 30 "$limit" "$@" 2>&1 | tee "$log" || code=${PIPESTATUS[0]}
  local command="$*"
  command=${command//"$build_dir"/build}
  durations+=("${command//"$root/"/}: $((SECONDS - started)) s, CPU busy $(($(cpu_busy) - busy)) s")
  if ((code != 0)); then
    failed+=("$*")
    failed_logs+=("$log")
    echo "test.sh: stage failed with exit code $code: $*" >> "$log"
  fi
  return 0
}
stage_count=0
# The sanitizer and fuzzer builds (about 20 minutes of compiling on 2 cores) run beside the
# stages up to the benchmark, which mostly wait on PostgreSQL, timeouts and child processes,
# and the TSan build beside the ASan stage too. They compile at the lowest CPU priority, so the
# tests' own processes come first. Each sanitizer or fuzz stage waits for its build's marker
# (a failed build leaves none: the stage then builds again and fails the same way).
prebuild_log=$stage_logs/sanitizer-and-fuzzer-builds.log
prebuilt=$stage_logs/built
prebuild_started=$SECONDS
# timeout leads a process group of its own: the EXIT trap stops every compiler with it.
timeout -k 30 3600 nice -n 19 bash -c '
  "$1/scripts/sanitize.sh" asan --build-only && touch "$2.asan" &&
  "$1/scripts/sanitize.sh" tsan --build-only && touch "$2.tsan" &&
  "$1/scripts/fuzz.sh" --build-only && touch "$2.fuzz"' _ "$root" "$prebuilt" >"$prebuild_log" 2>&1 &
prebuild_pid=$!
trap '[[ -z "$prebuild_pid" ]] || kill -- -"$prebuild_pid" 2>/dev/null || true; "$root/scripts/pg.sh" stop "$pg_dir" || true' EXIT
# Waits until the background build of $1 is done, or the background builds have ended.
await_build() {
  local started=$SECONDS
  while [[ ! -e "$prebuilt.$1" ]] && kill -0 "$prebuild_pid" 2>/dev/null; do sleep 2; done
  durations+=("waiting for the $1 build: $((SECONDS - started)) s")
}
# The e2e tier's span test decodes exports with the official OpenTelemetry definitions from
# the npm registry; without node, npm or the registry it is skipped and says why.
if ! "$root/scripts/otlp-decoder.sh" "$build_dir/otlp-decoder"; then
  export OUTBOX_OTLP_DECODER_UNAVAILABLE="scripts/otlp-decoder.sh could not install the decoder (node, npm or the npm registry missing)"
  echo "test.sh: $OUTBOX_OTLP_DECODER_UNAVAILABLE: the span export test is skipped" >&2
fi
# The pgbouncer and failover tiers run as stages of their own below (their clusters are
# their own); the fault tier runs beside the others (scripts/tiers.sh). Each test has its own
# timeout; the stage's bound is only a backstop.
# The integration tier runs once, under ASan+UBSan (its admin load test also here, at full
# size): scripts/sanitize.sh asan below.
stage 3600 "$root/scripts/tiers.sh" "$build_dir" --integration-sanitized
"$root/scripts/pg.sh" stop "$pg_dir" || true

as_root=()
((EUID == 0)) || as_root=(sudo --preserve-env=PATH)
# The previous release's hosts keep working while this release migrates and replaces them
# (about 40 s; building the previous release the first time adds 5 to 15 minutes on 2 cores,
# later runs reuse it from the build directory).
stage 1800 "$root/scripts/upgrade-test.sh" "$build_dir"
# Six hosts through PgBouncer in transaction mode, with kill -9s and a PgBouncer restart
# (its own PostgreSQL cluster and PgBouncer on loopback; 70-90 s).
stage 420 ctest --test-dir "$build_dir" --output-on-failure -L pgbouncer
# Failover to a promoted standby (label failover: a primary, a synchronous standby and three
# hosts of its own on loopback; 30-65 s).
stage 420 ctest --test-dir "$build_dir" --output-on-failure -L failover
# The benchmark's smoke run keeps it from rotting (its figures mean nothing). Without node,
# npm or the npm registry it still runs outboxd, the latency probe and pgbench, and says so.
bench_args=(--quick --build-dir "$build_dir")
if ! command -v npm >/dev/null || ! timeout 30 npm ping >/dev/null 2>&1; then
  echo "test.sh: node/npm or the npm registry is not available: the benchmark smoke run skips graphile-worker and pg-boss" >&2
  bench_args+=(--no-peers)
fi
stage 900 "$root/bench/run.sh" "${bench_args[@]}"
# These need no sanitizer build: they run while the background builds finish.
stage 120 "$root/scripts/check-observability.sh"
# Installs, upgrades and purges the Debian packages on this machine (root: it is a throwaway
# CI machine, or a developer's who asked for the whole suite).
stage 2400 "${as_root[@]}" "$root/scripts/package-test.sh"
await_build asan
stage 1800 "$root/scripts/sanitize.sh" asan
await_build tsan
stage 1800 "$root/scripts/tsan-and-fuzz.sh" "$prebuilt.fuzz" "$prebuild_pid"
prebuild_code=0
wait "$prebuild_pid" || prebuild_code=$?
prebuild_pid=
durations+=("sanitizer and fuzzer builds, in the background: $((SECONDS - prebuild_started)) s (exit $prebuild_code)")
# How long each stage took, for the README's table (the whole run: $SECONDS s).
printf 'test.sh: took %s\n' "${durations[@]}" "in all: $SECONDS s, CPU busy $(($(cpu_busy) - busy_at_start)) s of $((SECONDS * $(nproc))) core-seconds" >&2
if ((${#failed[@]})); then
  for log in "${failed_logs[@]}"; do
    echo "test.sh: ===== the last 150 lines of a failed stage ($log) =====" >&2
    tail -n 150 "$log" >&2
  done
  # A CI log keeps only its tail: the failures of every failed stage, compactly, come last.
  for log in "${failed_logs[@]}"; do
    echo "test.sh: ===== what failed in $log =====" >&2
    grep -E -A4 '^\[  FAILED  \]|: Failure$|^test\.sh: stage failed' "$log" | grep -v '^--$' | head -n 60 >&2 || true
  done
  echo "test.sh: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "test.sh: all stages passed" >&2
