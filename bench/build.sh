# Sourced by bench/run.sh and bench/scaling.sh: builds the benchmark's targets, sets
# $outboxd, $tool and $plugins, and empties $results_dir (logs/ and results.tsv, in
# $results). Needs $root, $build_dir, $reuse_build (1: add the bench targets to that
# configured tree and keep its build type), $bench_script (for messages) and $results_dir.
"$root/scripts/install-deps.sh"
if ((reuse_build)); then
  [[ -f "$build_dir/CMakeCache.txt" ]] ||
    { echo "$bench_script: --build-dir $build_dir is not a configured build tree" >&2; exit 2; }
  cmake -S "$root" -B "$build_dir" -DOUTBOX_BUILD_BENCH=ON >/dev/null
else
  cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DOUTBOX_BUILD_BENCH=ON -DOUTBOX_BUILD_TESTS=OFF \
    -DOUTBOX_BUILD_PLUGINS=OFF >/dev/null
fi
cmake --build "$build_dir" --target outbox_bench -j"$(nproc)" >/dev/null
outboxd=$build_dir/host/outboxd
tool=$build_dir/bench/outbox_bench
plugins=$build_dir/bench/plugins

rm -rf "$results_dir"
mkdir -p "$results_dir/logs"
results=$results_dir/results.tsv
: >"$results"
