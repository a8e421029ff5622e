#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang into build-fuzz/ and runs each for a
# bounded time, starting from its committed seed corpus (fuzz/corpus/<target>/, never
# modified: new inputs go to a scratch directory). Any crash, sanitizer report, timeout or
# violated property fails the script and leaves the input in build-fuzz/artifacts/.
#   scripts/fuzz.sh                  every target, FUZZ_SECONDS (default 30) each
#   scripts/fuzz.sh config           one target
#   scripts/fuzz.sh --build-only     builds every target and stops
#   build-fuzz/fuzz/fuzz_config build-fuzz/artifacts/crash-...   replays a saved input
# OUTBOX_FUZZ_BUILD_DIR overrides the build directory.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${OUTBOX_FUZZ_BUILD_DIR:-$root/build-fuzz}
seconds=${FUZZ_SECONDS:-30}
build_only=false
if [[ "${1:-}" == --build-only ]]; then
  build_only=true
  shift
fi
targets=("$@")
((${#targets[@]})) || targets=(config payload)

# Installs clang and its libFuzzer runtime too.
"$root/scripts/install-deps.sh"
# shellcheck source=scripts/ccache.sh
source "$root/scripts/ccache.sh"
cmake -S "$root" -B "$build_dir" -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DOUTBOX_BUILD_FUZZERS=ON -DOUTBOX_BUILD_TESTS=OFF -DOUTBOX_BUILD_PLUGINS=OFF "${launcher[@]}" >/dev/null
cmake --build "$build_dir" -j"$(nproc)" --target "${targets[@]/#/fuzz_}"
if $build_only; then
  exit 0
fi

artifacts=$build_dir/artifacts
mkdir -p "$artifacts"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
status=0
for target in "${targets[@]}"; do
  dict=()
  [[ -f "$root/fuzz/$target.dict" ]] && dict=(-dict="$root/fuzz/$target.dict")
  mkdir -p "$scratch/$target"
  echo "fuzz.sh: fuzz_$target for ${seconds}s" >&2
  if ! "$build_dir/fuzz/fuzz_$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 "${dict[@]}" -artifact_prefix="$artifacts/" \
      "$scratch/$target" "$root/fuzz/corpus/$target" >"$scratch/$target.log" 2>&1; then
    tail -n 60 "$scratch/$target.log" >&2
    echo "fuzz.sh: fuzz_$target FAILED; the input is in $artifacts/" >&2
    status=1
  else
    grep -E '^(Done|stat::number_of_executed_units)' "$scratch/$target.log" >&2 || true
  fi
done
exit "$status"
