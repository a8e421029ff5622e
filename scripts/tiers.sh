#!/usr/bin/env bash
# scripts/test.sh's first test stage: every CTest tier of one build except pgbouncer and
# failover (stages of their own), with the fault tier side by side with the others. The fault
# tier mostly waits (on kills, restarts, timeouts and its own PostgreSQL clusters), and every
# test keeps to databases and roles named after its own process, so the two streams share
# nothing but the machine. The fault tier's output follows the others'.
#   scripts/tiers.sh <build-dir>
#   scripts/tiers.sh <build-dir> --integration-sanitized   leaves out the integration tier's
#       main entry (`integration`), which scripts/test.sh runs under ASan+UBSan instead
#       (scripts/sanitize.sh asan); its full-size admin load test (`integration_at_scale`) stays
set -euo pipefail

build_dir=${1:?usage: scripts/tiers.sh <build-dir> [--integration-sanitized]}
exclude=()
case "${2:-}" in
  "") ;;
  --integration-sanitized) exclude=(-E '^integration$') ;;
  *)
    echo "scripts/tiers.sh: unknown argument '$2' (usage: scripts/tiers.sh <build-dir> [--integration-sanitized])" >&2
    exit 2
    ;;
esac
fault_log=$(mktemp)
trap 'rm -f "$fault_log"' EXIT

ctest --test-dir "$build_dir" --output-on-failure -L fault >"$fault_log" 2>&1 &
fault_pid=$!
status=0
ctest --test-dir "$build_dir" --output-on-failure -LE 'pgbouncer|failover|fault' "${exclude[@]}" || status=$?
fault_status=0
wait "$fault_pid" || fault_status=$?
echo "tiers.sh: the fault tier, run beside the others:"
cat "$fault_log"
((status == 0 && fault_status == 0))
