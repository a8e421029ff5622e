#!/usr/bin/env bash
# scripts/test.sh's last stage: the TSan tests (scripts/sanitize.sh tsan), which run one at a
# time and keep one core busy, with the fuzzers (scripts/fuzz.sh, bounded in time) beside
# them on the other core once their build is done. The fuzzers' output follows.
#   scripts/tsan-and-fuzz.sh <fuzz-build-marker> <background-build-pid>
# The fuzzers start when the marker exists or the background builds have ended (a failed
# build leaves no marker: scripts/fuzz.sh then builds again and fails the same way).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
marker=${1:?usage: scripts/tsan-and-fuzz.sh <fuzz-build-marker> <background-build-pid>}
builds=${2:?usage: scripts/tsan-and-fuzz.sh <fuzz-build-marker> <background-build-pid>}
fuzz_log=$(mktemp)
trap 'rm -f "$fuzz_log"' EXIT

(
  while [[ ! -e "$marker" ]] && kill -0 "$builds" 2>/dev/null; do sleep 2; done
  "$root/scripts/fuzz.sh"
) >"$fuzz_log" 2>&1 &
fuzz_pid=$!
tsan_status=0
"$root/scripts/sanitize.sh" tsan || tsan_status=$?
fuzz_status=0
wait "$fuzz_pid" || fuzz_status=$?
echo "tsan-and-fuzz.sh: scripts/fuzz.sh, run beside the TSan tests (exit $fuzz_status):"
cat "$fuzz_log"
((tsan_status == 0 && fuzz_status == 0))
