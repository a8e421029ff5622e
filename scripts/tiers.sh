#!/usr/bin/env bash
# scripts/test.sh's first test stage: every CTest tier of one build except pgbouncer and
# failover (stages of their own), in two streams side by side. The second stream holds the
# tiers that mostly wait (on kills, restarts, timeouts, child processes, a browser and their
# own PostgreSQL clusters): fault, e2e, the NATS relay's end-to-end test, the browser, the
# docs and the SDK package; the first the rest, the integration tier the longest of them.
# Every test keeps to databases, roles and ports of its own process, so the two streams share
# nothing but the machine. The second stream's output follows the first's.
#   scripts/tiers.sh <build-dir>
set -euo pipefail

build_dir=${1:?usage: scripts/tiers.sh <build-dir>}
side_log=$(mktemp)
trap 'rm -f "$side_log"' EXIT
side='^(fault|e2e|nats-relay-e2e|browser_console|docs|docs_links|docs_config_reference|sdk_package)$'

ctest --test-dir "$build_dir" --output-on-failure -LE 'pgbouncer|failover' -R "$side" >"$side_log" 2>&1 &
side_pid=$!
status=0
ctest --test-dir "$build_dir" --output-on-failure -LE 'pgbouncer|failover' -E "$side" || status=$?
side_status=0
wait "$side_pid" || side_status=$?
echo "tiers.sh: the tiers run beside the others (fault, e2e, browser, docs, SDK package):"
cat "$side_log"
((status == 0 && side_status == 0))
