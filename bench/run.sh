#!/usr/bin/env bash
# outboxd benchmark: events/s, PostgreSQL CPU and WAL bytes per event, publish →
# handler-start latency and peak RSS of outboxd, graphile-worker, pg-boss and the raw SQL
# ceilings (pgbench), all on one throwaway PostgreSQL 15 cluster with default settings, in
# one run. Two protocols for every system: burst (workers running and idle, N events become
# due in one commit) and backlog (N events already waiting, the worker process started
# cold; clock from exec). Delay accuracy: how late delayed events start, with no backlog and
# while N/5 events drain. Prints markdown tables (paste into docs/performance.md).
#
#   bench/run.sh [--quick] [--n N] [--runs R] [--latency-seconds S] [--growth] [--hosts]
#                [--no-peers] [--only SECTIONS] [--build-dir DIR]
#
#   bench/run.sh --scaling [--n N] [--rate R] [--build-dir DIR]
#                      instead: per-event PostgreSQL CPU, WAL bytes and statements for a no-op
#                      and a one-row handler (bench/scaling.sh)
#
#   --quick            N = 2,000, one run, 3 s of latency, every drain bounded to 2 minutes:
#                      checks that everything still works (scripts/test.sh runs it); its
#                      figures mean nothing
#   --n N              events per throughput run (default 100,000)
#   --runs R           runs per figure; the table shows the median and min–max (default 3)
#   --latency-seconds  how long each latency run publishes 50 events/s (default 20)
#   --growth           also: the table pre-filled with 1,000,000 COMPLETED (with their
#                      consumption rows) and 100,000 REVIEW_REQUIRED rows, and the plans of
#                      the claim and of the outcome-storing statement on the empty and the
#                      pre-filled table, and on a table where one REVIEW_REQUIRED event holds
#                      back 200,000 successors of its aggregate (the claim's rows read and
#                      time, against the empty table's)
#   --hosts            also: 1, 2 and 4 outboxd hosts on one database
#   --tenants          also: fair tenants. Company tenant-a has 2×N events waiting; one host
#                      (defaults) drains them alone, then again while company tenant-b
#                      publishes 20 events/s for 30 s: tenant-a's rate in both runs and
#                      tenant-b's start delay from publication (p50, p99, max)
#   --pgbouncer        also: the write handler through PgBouncer (pool_mode = transaction,
#                      database.pool_mode = transaction, session_url direct), next to the
#                      same direct with pool_mode session and with pool_mode transaction
#   --no-peers         skip graphile-worker and pg-boss (they need node and npm)
#   --only SECTIONS    comma-separated subset of: outboxd, latency, delay, pgbench, peers, growth, hosts,
#                      pgbouncer, tenants (outboxd and peers run both protocols; pgbench-write, the
#                      writing handler's statements, runs with outboxd or pgbench)
#   --build-dir DIR    add the bench targets to this already configured build tree and use
#                      its outboxd (keeps its build type; for smoke runs next to the tests)
#
# Builds outboxd, the bench plugins and the outbox_bench helper in Release mode into
# OUTBOX_BENCH_BUILD_DIR (default build-bench/). The peers are installed from the npm
# registry into a temporary folder (versions pinned in bench/peers/package.json). The
# table, the raw records and every process log (PostgreSQL's too) are left in
# <build dir>/bench-results/.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# The measured scaling model is a run of its own (bench/scaling.sh documents it).
if [[ "${1:-}" == --scaling ]]; then shift; exec "$root/bench/scaling.sh" "$@"; fi
build_dir=${OUTBOX_BENCH_BUILD_DIR:-$root/build-bench}

n=100000
runs=3
latency_seconds=20
latency_rate=50
sections=outboxd,latency,delay,pgbench,peers
delay_events=200
delay_window=5
quick=0
reuse_build=0
drain_timeout=900
while (($#)); do
  case "$1" in
    --quick) quick=1; n=2000; runs=1; latency_seconds=3; drain_timeout=120; delay_events=50; delay_window=2 ;;
    --build-dir) build_dir=$(cd "$2" && pwd); reuse_build=1; shift ;;
    --n) n=$2; shift ;;
    --runs) runs=$2; shift ;;
    --latency-seconds) latency_seconds=$2; shift ;;
    --growth) sections+=,growth ;;
    --hosts) sections+=,hosts ;;
    --tenants) sections+=,tenants ;;
    --pgbouncer) sections+=,pgbouncer ;;
    --no-peers) sections=${sections//peers/} ;;
    --only) sections=$2; shift ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ "$n" =~ ^[0-9]+$ && "$runs" =~ ^[0-9]+$ && "$latency_seconds" =~ ^[0-9]+$ ]] ||
  { echo "run.sh: --n, --runs and --latency-seconds take whole numbers" >&2; exit 2; }
want() { [[ ",$sections," == *",$1,"* ]]; }

# outboxd settings: its defaults, and the setting tuned for one busy host (mirrors the
# peers' best: 64 in flight, claims of up to 1,000).
tuned_env=(OUTBOX_CONCURRENCY=64 OUTBOX_BATCH_SIZE=1000)
tuned_text="concurrency 64, batch 1000"
# The peers' settings, each justified from the peer's own documentation in
# docs/performance.md#peer-settings. Defaults: graphile-worker's defaults with 10 jobs in
# flight (its pool is then 10, its default); best: 64 in flight with the pool its
# documentation advises (concurrentJobs + 2) and its batching options; pg-boss: 10 polling
# workers fetching up to 1,000 jobs each, with a pool of one connection per worker + 2.
graphile_default_args=(--concurrency 10 --max-pool-size 10)
graphile_best_args=(--concurrency 64 --max-pool-size 66 --local-queue 1000 --complete-batch-delay 0)
pgboss_best_args=(--workers 10 --max 12 --batch-size 1000 --poll 0.5)

log() { echo "bench: $*" >&2; }

if want peers && ! command -v npm >/dev/null; then
  echo "run.sh: the peers need node and npm; install them or pass --no-peers" >&2
  exit 2
fi

log "building into $build_dir"
bench_script=run.sh
results_dir=$build_dir/bench-results
# shellcheck source=bench/build.sh
source "$root/bench/build.sh"


# Under /tmp: the postgres user must reach the cluster directory.
pg_dir=$(mktemp -d /tmp/outbox-bench-pg.XXXXXX)
work=$(mktemp -d /tmp/outbox-bench.XXXXXX)
host_pids=()
cleanup() {
  local pid
  for pid in "${host_pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  cp "$pg_dir/log" "$results_dir/logs/postgresql.log" 2>/dev/null || true
  "$root/scripts/pg.sh" stop "$pg_dir" || true
  rm -rf "$work"
}
trap cleanup EXIT

port=$("$root/scripts/pg.sh" free-port)
server=$("$root/scripts/pg.sh" start "$pg_dir" "$port")
base=${server%/postgres}
postmaster=$(head -n 1 "$pg_dir/data/postmaster.pid")
pg_version=$(psql -X -At -d "$server" -c "SHOW server_version")
log "PostgreSQL $pg_version at $base (default settings)"

sql() { PGOPTIONS='-c client_min_messages=warning' psql -X -q -At -v ON_ERROR_STOP=1 -d "$base/$1" -c "$2"; }
record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$results"; }
fresh_db() {  # name [template]; FILE_COPY checkpoints first, so every run starts from clean buffers
  sql postgres "DROP DATABASE IF EXISTS $1" >/dev/null
  if [[ -n "${2:-}" ]]; then
    sql postgres "CREATE DATABASE $1 TEMPLATE $2 STRATEGY FILE_COPY"
  else
    sql postgres "CREATE DATABASE $1"
  fi
}
load_events() {  # db type count: N due events without a NOTIFY, for runs that start after the load
  sql "$1" "INSERT INTO event_publication (company_id, event_type, payload)
            SELECT 'bench', '$2', jsonb_build_object('n', i) FROM generate_series(1, $3) AS i" >/dev/null
}

fresh_db bench_template
OUTBOX_DATABASE_URL=$base/bench_template "$outboxd" migrate >"$results_dir/logs/migrate.log" 2>&1
sql bench_template "CREATE TABLE bench_effect (event_id uuid PRIMARY KEY, written_at timestamptz NOT NULL DEFAULT now())"

# What one client gets from the disk: every commit waits for a WAL flush (fsync is on), so
# this bounds the figures where each event costs a commit of its own. Measured at the start
# and at the end: on a shared machine it changes.
commit_rate() {
  fresh_db bench_probe
  sql bench_probe "CREATE TABLE commit_probe (id bigint)"
  printf 'INSERT INTO commit_probe VALUES (1);\n' >"$work/commit_probe.sql"
  pgbench -n -c 1 -T 3 -f "$work/commit_probe.sql" "$base/bench_probe" 2>/dev/null | sed -n 's/^tps = \([0-9]*\).*/\1/p'
}
commits_at_start=$(commit_rate)
revision=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [[ -n "$(git -C "$root" status --porcelain -- host sdk migrations 2>/dev/null)" ]]; then
  revision+=" with uncommitted changes to host/, sdk/ or migrations/"
fi
record meta title "N = $n events per throughput run, PostgreSQL $pg_version (defaults, fsync on), $(nproc) cores, outboxd at $revision" ""
load_at_start=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- outboxd ------------------------------------------------------------------------

# start_hosts LABEL DB KIND COUNT [--config FILE] -- [ENV=VALUE...]
start_hosts() {
  local label=$1 db=$2 kind=$3 count=$4 i logfile config=()
  shift 4
  if [[ "${1:-}" == --config ]]; then config=(--config "$2"); shift 2; fi
  [[ "${1:-}" == -- ]] && shift
  host_pids=()
  for ((i = 1; i <= count; i++)); do
    logfile=$results_dir/logs/$label-host$i.log
    env OUTBOX_DATABASE_URL="$base/$db" OUTBOX_PLUGIN_DIR="$plugins/$kind" OUTBOX_ADMIN_LISTEN=off \
      OUTBOX_HOST_ID="bench-$i" "$@" "$outboxd" run "${config[@]}" >>"$logfile" 2>&1 &
    host_pids+=($!)
  done
  for ((i = 1; i <= count; i++)); do
    logfile=$results_dir/logs/$label-host$i.log
    for _ in $(seq 1 300); do
      grep -q " started as " "$logfile" 2>/dev/null && break
      kill -0 "${host_pids[i - 1]}" 2>/dev/null || break
      sleep 0.1
    done
    grep -q " started as " "$logfile" || { echo "run.sh: outboxd did not start; its log:" >&2; cat "$logfile" >&2; exit 1; }
  done
}

stop_hosts() {
  local pid
  for pid in "${host_pids[@]}"; do kill -TERM "$pid"; done
  for pid in "${host_pids[@]}"; do wait "$pid" || log "outboxd $pid exited with status $?"; done
  host_pids=()
}

# Warnings and errors the hosts logged, for the notes under the table.
count_log_problems() {
  local logfile problems
  for logfile in "$results_dir"/logs/*-host*.log; do
    [[ -e "$logfile" ]] || continue
    problems=$(grep -cE '^[^ ]+ (warn|error) ' "$logfile" || true)
    if ((problems > 0)); then
      record note "$(basename "$logfile")" "outboxd logged $problems warning/error line(s) in bench-results/logs/$(basename "$logfile")" ""
    fi
  done
}

# Each scenario function below measures one run (the global $run); the main loop runs every
# scenario once per round, so a machine whose speed drifts (other work, a shared disk)
# affects every system alike instead of whichever happened to run last.

# outboxd_throughput KEY DESCRIPTION KIND TYPE HOSTS TEMPLATE [ENV=VALUE...]; drain_args
# (global, normally empty) is passed on to `outbox_bench drain`.
# host_config (global, normally empty) is passed on to start_hosts (--config FILE).
drain_args=()
host_config=()
outboxd_throughput() {
  local key=$1 description=$2 kind=$3 type=$4 hosts=$5 template=$6 line pid_args=() pid
  shift 6
  fresh_db bench_run "$template"
  start_hosts "$key" bench_run "$kind" "$hosts" "${host_config[@]}" -- "$@"
  for pid in "${host_pids[@]}"; do pid_args+=(--pid "$pid"); done
  line=$("$tool" drain --url "$base/bench_run" --type "$type" --n "$n" --timeout "$drain_timeout" \
    --postmaster "$postmaster" "${pid_args[@]}" "${drain_args[@]}")
  stop_hosts
  record tp "$key" "$description" "$line"
  log "$description, run $run/$runs: $line"
}

# outboxd_latency KEY DESCRIPTION [ENV=VALUE...]
outboxd_latency() {
  local key=$1 description=$2 starts commits config line rss
  shift 2
  fresh_db bench_run bench_template
  starts=$work/$key-$run.starts
  commits=$work/$key-$run.commits
  config=$work/$key.yaml
  printf 'handlers:\n  bench-latency:\n    config: { output: "%s" }\n' "$starts" >"$config"
  start_hosts "$key" bench_run latency 1 --config "$config" -- "$@"
  "$tool" publish --url "$base/bench_run" --type BenchLatency --rate "$latency_rate" --seconds "$latency_seconds" \
    --commits "$commits" >/dev/null
  sleep 1
  rss=$(awk '/^VmHWM:/ { print $2 }' "/proc/${host_pids[0]}/status")
  stop_hosts
  # The first second is the warm-up.
  line="$("$tool" stats --starts "$starts" --commits "$commits" --skip "$latency_rate") rss_kib=$rss"
  record lat "$key" "$description" "$line"
  log "$description, run $run/$runs: $line"
}

scenarios=()
if want outboxd; then
  s_outboxd_default() {
    outboxd_throughput outboxd-default "outboxd defaults (concurrency 8, batch 20), no-op" noop BenchNoop 1 bench_template
  }
  s_outboxd_tuned() {
    outboxd_throughput outboxd-tuned "outboxd tuned ($tuned_text), no-op" noop BenchNoop 1 bench_template \
      "${tuned_env[@]}"
  }
  s_outboxd_write_default() {
    outboxd_throughput outboxd-write-default "outboxd defaults, handler writes 1 row via ctx.db()" \
      write BenchWrite 1 bench_template
  }
  # The writing handler's target setting: defaults, with a pooled connection for each of
  # the 8 handlers in flight (pgbench-write runs its statements with as many clients).
  s_outboxd_write_pool() {
    outboxd_throughput outboxd-write-pool "outboxd defaults + pool_size $write_clients, writes 1 row via ctx.db()" \
      write BenchWrite 1 bench_template OUTBOX_DB_POOL_SIZE="$write_clients"
  }
  s_outboxd_write_tuned() {
    outboxd_throughput outboxd-write-tuned "outboxd tuned + pool_size 64, writes 1 row via ctx.db()" \
      write BenchWrite 1 bench_template "${tuned_env[@]}" OUTBOX_DB_POOL_SIZE=64
  }
  # Commit grouping (handlers.<name>.commit_group): up to 32 events' ctx.db() work in one
  # transaction, each in a savepoint. A group takes events already claimed, so the host
  # claims ahead (batch 256); one pooled connection per worker.
  s_outboxd_write_group() {
    printf 'handlers:\n  bench-write:\n    commit_group: { max_events: 32, max_wait: 20ms }\n' >"$work/write-group.yaml"
    host_config=(--config "$work/write-group.yaml")
    outboxd_throughput outboxd-write-group \
      "outboxd, commit grouping (32 events, 20ms; batch 256, pool_size $write_clients), writes 1 row via ctx.db()" \
      write BenchWrite 1 bench_template OUTBOX_BATCH_SIZE=256 OUTBOX_DB_POOL_SIZE="$write_clients"
    host_config=()
  }
  # Per-aggregate ordering: the same events over N/10 aggregates (ten in a row each), in the
  # same round as the unkeyed tuned run it is compared with.
  s_outboxd_keyed() {
    drain_args=(--aggregates "$((n / 10))")
    outboxd_throughput outboxd-keyed "outboxd tuned ($tuned_text), no-op, keyed: $((n / 10)) aggregates" \
      noop BenchNoop 1 bench_template "${tuned_env[@]}"
    drain_args=()
  }
  # Span export (telemetry.otlp_endpoint) to an OTLP sink on loopback that reads each body
  # and answers 200: what a span per call and per claim costs the host, next to the tuned
  # run without it. The sink runs on node, like the peers.
  s_outboxd_traced() {
    if ! command -v node >/dev/null; then
      log "outboxd tuned with span export: skipped (the OTLP sink needs node)"
      return
    fi
    local sink_port sink_pid
    sink_port=$("$root/scripts/pg.sh" free-port)
    node -e 'require("http").createServer((q, r) => { q.resume(); q.on("end", () => { r.writeHead(200); r.end(); }); })
             .listen(Number(process.argv[1]), "127.0.0.1");' "$sink_port" &
    sink_pid=$!
    outboxd_throughput outboxd-traced "outboxd tuned ($tuned_text), no-op, spans exported over OTLP" \
      noop BenchNoop 1 bench_template "${tuned_env[@]}" \
      OUTBOX_TELEMETRY_OTLP_ENDPOINT="http://127.0.0.1:$sink_port/v1/traces"
    kill "$sink_pid" 2>/dev/null || true
    wait "$sink_pid" 2>/dev/null || true
  }
  scenarios+=(s_outboxd_default s_outboxd_tuned s_outboxd_traced s_outboxd_keyed s_outboxd_write_default
    s_outboxd_write_pool s_outboxd_write_tuned s_outboxd_write_group)
fi

# ---- backlog: N events already waiting, the worker process started cold -------------------

# outboxd_backlog KEY DESCRIPTION KIND TYPE [ENV=VALUE...]: the clock runs from exec (so
# the host's start-up, plugin load and pools count) to the first 10 ms poll that finds the
# queue drained; first_claim_ms is exec to the first claimed event.
outboxd_backlog() {
  local key=$1 description=$2 kind=$3 type=$4 line
  shift 4
  fresh_db bench_run bench_template
  load_events bench_run "$type" "$n"
  line=$(env OUTBOX_DATABASE_URL="$base/bench_run" OUTBOX_PLUGIN_DIR="$plugins/$kind" OUTBOX_ADMIN_LISTEN=off \
    OUTBOX_HOST_ID=bench-1 "$@" "$tool" backlog --url "$base/bench_run" --n "$n" --timeout "$drain_timeout" \
    --postmaster "$postmaster" --log "$results_dir/logs/$key-host1.log" \
    --claimed-sql "SELECT EXISTS (SELECT 1 FROM event_publication WHERE status = 'PROCESSING')
                       OR EXISTS (SELECT 1 FROM event_publication WHERE status = 'COMPLETED')" \
    -- "$outboxd" run)
  record tp "$key" "$description" "$line"
  log "$description, run $run/$runs: $line"
}
if want outboxd; then
  s_backlog_outboxd_default() {
    outboxd_backlog backlog-outboxd-default "outboxd defaults (concurrency 8, batch 20), no-op" noop BenchNoop
  }
  s_backlog_outboxd_tuned() {
    outboxd_backlog backlog-outboxd-tuned "outboxd tuned ($tuned_text), no-op" noop BenchNoop "${tuned_env[@]}"
  }
  scenarios+=(s_backlog_outboxd_default s_backlog_outboxd_tuned)
fi
if want latency; then
  s_outboxd_latency() { outboxd_latency outboxd-default "outboxd defaults, $latency_rate events/s offered"; }
  scenarios+=(s_outboxd_latency)
fi

# ---- delay accuracy: delayed events coming due while a backlog drains ---------------------

# wait_completed KEY: until every event of bench_run is COMPLETED (at most drain_timeout).
wait_completed() {
  local deadline=$((SECONDS + drain_timeout))
  until [[ $(sql bench_run "SELECT count(*) FROM event_publication WHERE status <> 'COMPLETED'") == 0 ]]; do
    ((SECONDS < deadline)) || { log "$1: events still unfinished after ${drain_timeout}s"; break; }
    sleep 0.2
  done
}

# outboxd_delay KEY BACKLOG: BACKLOG events are waiting and D delayed events (published in
# one transaction through outbox_publish(..., deliver_after => ...)) come due one by one over
# the next few seconds; one host with its defaults drains both. Lateness = handler start −
# deliver_after (the plugin's clock and the server's: one machine). A delayed event is
# claimed in due-time order with everything else, so behind a backlog its lateness is the
# time the host needs for the events that were due before it. "early" must be 0.
outboxd_delay() {
  local key=$1 backlog=$2 starts config due line
  fresh_db bench_run bench_template
  starts=$work/$key-$run.starts
  config=$work/$key.yaml
  printf 'handlers:\n  bench-latency:\n    config: { output: "%s" }\n' "$starts" >"$config"
  if ((backlog > 0)); then load_events bench_run BenchLatency "$backlog"; fi
  sql bench_run "SELECT count(outbox_publish('bench', 'BenchLatency', '{}',
                   deliver_after => now() + interval '1 second' + i * ($delay_window * interval '1 second') / $delay_events))
                 FROM generate_series(1, $delay_events) AS i" >/dev/null
  start_hosts "$key" bench_run latency 1 --config "$config"
  touch "$starts"
  wait_completed "$key"
  stop_hosts
  due=$work/$key-$run.due
  sql bench_run "SELECT event_id, (extract(epoch FROM deliver_after) * 1000000)::bigint FROM event_publication
                 WHERE deliver_after IS NOT NULL" >"$due"
  line=$(awk -F'[| ]' 'NR == FNR { due[$1] = $2; next } ($1 in due) { print ($3 - due[$1]) / 1000 }' "$due" "$starts" |
    sort -n | awk '{ v[NR] = $1; if ($1 < 0) early++ }
      END { if (NR == 0) { print "no delayed event ran"; exit }
            i50 = int(NR * 0.50 + 0.999); i99 = int(NR * 0.99 + 0.999)
            printf "n=%d p50_ms=%.1f p99_ms=%.1f max_ms=%.1f early=%d", NR, v[i50], v[i99], v[NR], early + 0 }')
  record note "$key" "Delay accuracy ($key, run $run): $delay_events delayed events due over ${delay_window}s, $backlog events waiting ahead, outboxd defaults: lateness (handler start − deliver_after) $line" ""
  log "$key, run $run/$runs: $line"
}
if want delay; then
  s_delay_idle() { outboxd_delay delay-idle 0; }
  s_delay_backlog() { outboxd_delay delay-backlog "$((n / 5))"; }
  scenarios+=(s_delay_idle s_delay_backlog)
fi

# ---- fair tenants: one company's backlog against another company's trickle ----------------

tenants_seconds=30
# outboxd_tenants KEY TRICKLE: company tenant-a has 2×N latency events waiting and one host
# with its defaults drains them; with TRICKLE, company tenant-b publishes 20 events/s for
# tenants_seconds meanwhile (outbox_bench publish). tenant-a's rate is its events over the
# span of their handler starts; tenant-b's delay is handler start − publication (one machine,
# one clock).
outboxd_tenants() {
  local key=$1 trickle=$2 starts config commits companies a_line b_line
  fresh_db bench_run bench_template
  starts=$work/$key-$run.starts
  commits=$work/$key-$run.commits
  companies=$work/$key-$run.companies
  config=$work/$key.yaml
  printf 'handlers:\n  bench-latency:\n    config: { output: "%s" }\n' "$starts" >"$config"
  sql bench_run "INSERT INTO event_publication (company_id, event_type, payload)
                 SELECT 'tenant-a', 'BenchLatency', jsonb_build_object('n', i) FROM generate_series(1, $((2 * n))) AS i" \
    >/dev/null
  start_hosts "$key" bench_run latency 1 --config "$config"
  touch "$starts"
  if ((trickle)); then
    "$tool" publish --url "$base/bench_run" --type BenchLatency --company tenant-b --rate 20 \
      --seconds "$tenants_seconds" --commits "$commits" >/dev/null
  fi
  wait_completed "$key"
  stop_hosts
  sql bench_run "SELECT event_id, company_id FROM event_publication" >"$companies"
  a_line=$(awk -F'[| ]' 'NR == FNR { company[$1] = $2; next }
      company[$1] == "tenant-a" { n++; if (min == "" || $3 < min) min = $3; if ($3 > max) max = $3 }
      END { printf "tenant-a: %d events at %.0f events/s", n, (max > min ? n / ((max - min) / 1e6) : 0) }' \
    "$companies" "$starts")
  b_line=$(awk -F'[| ]' 'NR == FNR { company[$1] = $2; next } company[$1] == "tenant-b" { print ($3 - $2) / 1000 }' \
    "$companies" "$starts" | sort -n | awk '{ v[NR] = $1 }
      END { if (NR == 0) exit
            i50 = int(NR * 0.50 + 0.999); i99 = int(NR * 0.99 + 0.999)
            printf "; tenant-b: %d events, start delay p50 %.1f ms, p99 %.1f ms, max %.1f ms", NR, v[i50], v[i99], v[NR] }')
  record note "$key" "Fair tenants ($key, run $run), outboxd defaults: $a_line$b_line" ""
  log "$key, run $run/$runs: $a_line$b_line"
}
if want tenants; then
  s_tenants_solo() { outboxd_tenants tenants-solo 0; }
  s_tenants_trickle() { outboxd_tenants tenants-trickle 1; }
  scenarios+=(s_tenants_solo s_tenants_trickle)
fi

# ---- pgbench: the raw claim+complete ceiling -------------------------------------------

# pgbench_ceiling KEY DESCRIPTION BATCH CLIENTS [EVENTS]
pgbench_ceiling() {
  local key=$1 description=$2 batch=$3 clients=$4 events=${5:-$n} per_client out tps done_count line
  per_client=$((events / batch / clients))
  ((per_client > 0)) || { log "skipping $key: N too small"; return 0; }
  fresh_db bench_run bench_template
  load_events bench_run BenchNoop "$events"
  out=$("$tool" cpu --postmaster "$postmaster" -- pgbench -n -M prepared -c "$clients" -j "$clients" \
    -t "$per_client" -D batch="$batch" -f "$root/bench/sql/claim_complete.sql" "$base/bench_run" 2>&1) ||
    { echo "$out" >&2; exit 1; }
  echo "$out" >>"$results_dir/logs/$key.log"
  tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out" | head -n 1)
  done_count=$(sql bench_run "SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'")
  if ((done_count != per_client * clients * batch)); then
    echo "run.sh: $key completed $done_count events, expected $((per_client * clients * batch))" >&2
    exit 1
  fi
  line=$(awk -v tps="$tps" -v batch="$batch" -v done="$done_count" '
    /^cpu_cmd_s=/ { split($1, c, "="); split($2, p, "=");
      printf "n=%d eps=%.0f cpu_host_s=%s cpu_pg_s=%s rss_kib=0", done, tps * batch, c[2], p[2] }' <<<"$out")
  record tp "$key" "$description" "$line"
  log "$description, run $run/$runs: $line"
}

if want pgbench; then
  s_claim100_c2() { pgbench_ceiling pgbench-claim100-c2 "raw SQL (pgbench) claim 100 + complete, 2 clients" 100 2; }
  s_claim100_c4() { pgbench_ceiling pgbench-claim100-c4 "raw SQL (pgbench) claim 100 + complete, 4 clients" 100 4; }
  # One commit per claim and per completion: bound by the disk's flush rate, so fewer
  # events give the same rate in much less time.
  claim1_events=$((n < 5000 ? n : 5000))
  s_claim1_c2() {
    pgbench_ceiling pgbench-claim1-c2 "raw SQL (pgbench) claim 1 + complete, 2 clients, N=$claim1_events" 1 2 \
      "$claim1_events"
  }
  scenarios+=(s_claim100_c2 s_claim100_c4 s_claim1_c2)
fi

# ---- pgbench: the writing handler's statements ---------------------------------------------

# What outboxd sends for one event of the writing handler (captured with log_statement =
# all; bench/sql/write_handler.sql), run by pgbench with as many clients as outboxd has
# handler connections, synchronous commit as everywhere here. Its events are claimed
# beforehand in one statement (outboxd claims 20 at a time: a small share per event).
write_clients=8
s_pgbench_write() {
  local key=pgbench-write events=$((n < 20000 ? n : 20000)) per_client out tps done_count line
  per_client=$((events / write_clients))
  fresh_db bench_run bench_template
  load_events bench_run BenchWrite "$((per_client * write_clients))"
  sql bench_run "
    UPDATE event_publication SET status = 'PROCESSING', attempt_count = 1, lease_owner = 'bench-1',
        lease_token = gen_random_uuid(), lease_expires_at = now() + interval '1 hour', version = version + 1;
    CREATE TABLE bench_claimed AS
        SELECT row_number() OVER (ORDER BY event_id) AS seq, event_id, lease_token FROM event_publication;
    CREATE UNIQUE INDEX ON bench_claimed (seq);
    CREATE SEQUENCE bench_claimed_seq"
  sql bench_run "VACUUM ANALYZE"
  out=$("$tool" cpu --postmaster "$postmaster" -- pgbench -n -M simple -c "$write_clients" -j "$write_clients" \
    -t "$per_client" -f "$root/bench/sql/write_handler.sql" "$base/bench_run" 2>&1) || { echo "$out" >&2; exit 1; }
  echo "$out" >>"$results_dir/logs/$key.log"
  tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out" | head -n 1)
  done_count=$(sql bench_run "SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'")
  ((done_count == per_client * write_clients)) ||
    { echo "run.sh: $key completed $done_count events, expected $((per_client * write_clients))" >&2; exit 1; }
  line=$(awk -v tps="$tps" -v done="$done_count" '
    /^cpu_cmd_s=/ { split($1, c, "="); split($2, p, "=");
      printf "n=%d eps=%.0f cpu_host_s=%s cpu_pg_s=%s rss_kib=0", done, tps, c[2], p[2] }' <<<"$out")
  record tp "$key" "raw SQL (pgbench) the writing handler's statements, $write_clients clients, N=$done_count" "$line"
  log "pgbench-write, run $run/$runs: $line"
}
# The plain ceiling commit grouping is measured against: one-row INSERTs into the same
# effect table, one commit each, by as many clients.
s_pgbench_insert() {
  local key=pgbench-insert events=$((n < 20000 ? n : 20000)) per_client out tps line
  per_client=$((events / write_clients))
  fresh_db bench_run bench_template
  printf 'INSERT INTO bench_effect (event_id) VALUES (gen_random_uuid());\n' >"$work/insert.sql"
  out=$("$tool" cpu --postmaster "$postmaster" -- pgbench -n -M simple -c "$write_clients" -j "$write_clients" \
    -t "$per_client" -f "$work/insert.sql" "$base/bench_run" 2>&1) || { echo "$out" >&2; exit 1; }
  echo "$out" >>"$results_dir/logs/$key.log"
  tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out" | head -n 1)
  line=$(awk -v tps="$tps" -v done="$((per_client * write_clients))" '
    /^cpu_cmd_s=/ { split($1, c, "="); split($2, p, "=");
      printf "n=%d eps=%.0f cpu_host_s=%s cpu_pg_s=%s rss_kib=0", done, tps, c[2], p[2] }' <<<"$out")
  record tp "$key" "raw SQL (pgbench) one-row INSERTs, one commit each, $write_clients clients, N=$((per_client * write_clients))" "$line"
  log "pgbench-insert, run $run/$runs: $line"
}
if want pgbench || want outboxd; then scenarios+=(s_pgbench_write s_pgbench_insert); fi

# ---- peers --------------------------------------------------------------------------

if want peers; then
  log "installing graphile-worker and pg-boss from the npm registry into a temporary folder"
  cp "$root/bench/peers/package.json" "$root/bench/peers/"*.mjs "$work/"
  (cd "$work" && npm install --no-audit --no-fund --loglevel=error) >"$results_dir/logs/npm-install.log" 2>&1 ||
    { cat "$results_dir/logs/npm-install.log" >&2; exit 1; }
  graphile_version=$(node -p "require('$work/node_modules/graphile-worker/package.json').version")
  pgboss_version=$(node -p "require('$work/node_modules/pg-boss/package.json').version")

  # peer KEY DESCRIPTION DRIVER MODE ARGS... — each run in a new, empty database
  peer() {
    local key=$1 description=$2 driver=$3 mode=$4 line kind=tp
    shift 4
    [[ "$mode" == latency ]] && kind=lat
    fresh_db bench_peer
    line=$(cd "$work" && NO_LOG_SUCCESS=1 timeout "$((drain_timeout + 60))" node "$driver" "$mode" --url "$base/bench_peer" --postmaster "$postmaster" "$@" \
      2>>"$results_dir/logs/$key.log" | tail -n 1)
    [[ "$line" == n=* ]] || { echo "run.sh: $key failed; see $results_dir/logs/$key.log" >&2; exit 1; }
    record "$kind" "$key" "$description" "$line"
    log "$description, run $run/$runs: $line"
  }
  s_graphile_default() {
    peer graphile-default "graphile-worker $graphile_version defaults, concurrency 10" graphile.mjs throughput \
      --n "$n" "${graphile_default_args[@]}"
  }
  s_graphile_best() {
    peer graphile-best "graphile-worker $graphile_version best (64, pool 66, localQueue 1000, delay 0)" \
      graphile.mjs throughput --n "$n" "${graphile_best_args[@]}"
  }
  s_pgboss_best() {
    peer pgboss-best "pg-boss $pgboss_version best (10 workers × batch 1000, pool 12, poll 0.5 s)" pgboss.mjs throughput \
      --n "$n" "${pgboss_best_args[@]}"
  }
  # peer_backlog KEY DESCRIPTION DRIVER BUSY_SQL ARGS...: the driver's `load` mode queues N
  # jobs (no worker running), then its `work` mode is started cold as outboxd is.
  peer_backlog() {
    local key=$1 description=$2 driver=$3 busy=$4 line
    shift 4
    fresh_db bench_peer
    (cd "$work" && node "$driver" load --url "$base/bench_peer" --n "$n") >>"$results_dir/logs/$key.log" 2>&1 ||
      { echo "run.sh: $key could not queue its jobs; see $results_dir/logs/$key.log" >&2; exit 1; }
    line=$(cd "$work" && NO_LOG_SUCCESS=1 "$tool" backlog --url "$base/bench_peer" --n "$n" --timeout "$drain_timeout" \
      --postmaster "$postmaster" --log "$results_dir/logs/$key.log" --busy-sql "$busy" -- node "$driver" work \
      --url "$base/bench_peer" "$@") || { echo "run.sh: $key failed; see $results_dir/logs/$key.log" >&2; exit 1; }
    record tp "$key" "$description" "$line"
    log "$description (backlog), run $run/$runs: $line"
  }
  graphile_busy="SELECT EXISTS (SELECT 1 FROM graphile_worker._private_jobs)"
  pgboss_busy="SELECT EXISTS (SELECT 1 FROM pgboss.job WHERE name = 'bench_noop' AND state < 'completed')"
  s_backlog_graphile_default() {
    peer_backlog backlog-graphile-default "graphile-worker $graphile_version defaults, concurrency 10" graphile.mjs \
      "$graphile_busy" "${graphile_default_args[@]}"
  }
  s_backlog_graphile_best() {
    peer_backlog backlog-graphile-best "graphile-worker $graphile_version best (64, pool 66, localQueue 1000, delay 0)" \
      graphile.mjs "$graphile_busy" "${graphile_best_args[@]}"
  }
  s_backlog_pgboss_best() {
    peer_backlog backlog-pgboss-best "pg-boss $pgboss_version best (10 workers × batch 1000, pool 12, poll 0.5 s)" pgboss.mjs \
      "$pgboss_busy" "${pgboss_best_args[@]}"
  }
  scenarios+=(s_graphile_default s_graphile_best s_pgboss_best s_backlog_graphile_default s_backlog_graphile_best
    s_backlog_pgboss_best)
  if want latency; then
    s_graphile_latency() {
      peer graphile-default "graphile-worker $graphile_version defaults, $latency_rate events/s offered" graphile.mjs \
        latency --rate "$latency_rate" --seconds "$latency_seconds" --skip "$latency_rate" "${graphile_default_args[@]}"
    }
    s_pgboss_latency() {
      peer pgboss-best "pg-boss $pgboss_version best, $latency_rate events/s offered" pgboss.mjs latency \
        --rate "$latency_rate" --seconds "$latency_seconds" --skip "$latency_rate" "${pgboss_best_args[@]}"
    }
    scenarios+=(s_graphile_latency s_pgboss_latency)
  fi
fi

# ---- growth: a table full of old rows ----------------------------------------------------

# The plans of outboxd's statements exactly as it sends them, logged by auto_explain
# (EXPLAIN ANALYZE, BUFFERS) while one tuned host drains 20,000 events: the claim (of the
# claims that got events, the middle one) and the statement that stores outcomes (the
# slowest one).
# With a third argument, a SQL condition: the drain starts (and the log is read from) once
# the host has made it true, within two minutes.
statement_plans() {
  local template=$1 label=$2 settled=${3:-} offset
  fresh_db bench_plan "$template"
  sql postgres "ALTER DATABASE bench_plan SET session_preload_libraries = 'auto_explain'"
  sql postgres "ALTER DATABASE bench_plan SET auto_explain.log_min_duration = 0"
  sql postgres "ALTER DATABASE bench_plan SET auto_explain.log_analyze = on"
  sql postgres "ALTER DATABASE bench_plan SET auto_explain.log_buffers = on"
  offset=$(wc -l <"$pg_dir/log")
  start_hosts "plan-$label" bench_plan noop 1 -- "${tuned_env[@]}"
  if [[ -n "$settled" ]]; then
    for _ in $(seq 1 1200); do [[ "$(sql bench_plan "SELECT $settled")" == t ]] && break; sleep 0.1; done
    [[ "$(sql bench_plan "SELECT $settled")" == t ]] || log "plans of $label: the host did not make '$settled' true"
    offset=$(wc -l <"$pg_dir/log")
  fi
  "$tool" drain --url "$base/bench_plan" --type BenchNoop --n 20000 >/dev/null
  stop_hosts
  tail -n +"$((offset + 1))" "$pg_dir/log" >"$work/plan-$label.log"
  extract_plan claim middle <"$work/plan-$label.log" >"$results_dir/plan-$label-claim.txt" ||
    log "no claim plan found in the server log for $label"
  extract_plan finish slowest <"$work/plan-$label.log" >"$results_dir/plan-$label-finish.txt" ||
    log "no finish plan found in the server log for $label"
}

# extract_plan claim|finish middle|slowest < server log: one auto_explain entry, from its
# duration line to the end of its plan, without the query text.
extract_plan() {
  awk -v kind="$1" -v pick="$2" '
    /^[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9] / {
      flush(); capture = ($0 ~ /plan:$/)
      if (capture) { duration = $0; sub(/.*duration: /, "", duration); sub(/ ms.*/, "", duration) }
      next
    }
    capture { entry = entry $0 "\n" }
    # Keeps the statements of this kind that touched events: the top node of the plan (its
    # first line with a cost) shows rows > 0.
    function flush(   n, lines, i, wanted) {
      if (kind == "claim") wanted = entry ~ /SKIP LOCKED/ && entry ~ /RETRY_WAIT/ && entry ~ /claimed/
      else wanted = entry ~ /INSERT INTO event_consumption/ && entry ~ /unnest/
      if (wanted) {
        n = split(entry, lines, "\n")
        for (i = 1; i <= n; i++) {
          if (lines[i] ~ /\(cost=/) {
            if (lines[i] !~ / rows=0 loops/) { plans[++count] = entry; durations[count] = duration + 0 }
            break
          }
        }
      }
      entry = ""
    }
    END {
      flush()
      if (count == 0) exit 1
      chosen = int((count + 1) / 2)
      if (pick == "slowest") for (i = 1; i <= count; i++) if (durations[i] > durations[chosen]) chosen = i
      printf "(%s of %d; %.1f ms)\n", pick, count, durations[chosen]
      # Only the plan: from the first node line (every node carries its cost) to the end.
      split(plans[chosen], lines, "\n")
      for (i = 1; i in lines; i++) {
        if (!started && lines[i] !~ /\(cost=/) continue
        started = 1
        sub(/^\t/, "", lines[i])
        if (lines[i] != "") print lines[i]
      }
    }'
}

if want growth; then
  log "pre-filling a template with 1,000,000 COMPLETED and 100,000 REVIEW_REQUIRED rows"
  fresh_db bench_growth bench_template
  sql bench_growth "
    INSERT INTO event_publication (company_id, event_type, payload, status, attempt_count, next_attempt_at,
                                   occurred_at, updated_at, completed_at, version)
    SELECT 'bench', 'BenchNoop', jsonb_build_object('n', i), 'COMPLETED', 1, t, t, t, t, 3
    FROM generate_series(1, 1000000) AS i, LATERAL (SELECT now() - (i % 86400) * interval '1 second' AS t) AS ts;
    INSERT INTO event_consumption (event_id, handler_name, consumed_at)
    SELECT event_id, 'bench-noop', completed_at FROM event_publication;
    INSERT INTO event_publication (company_id, event_type, payload, status, attempt_count, next_attempt_at,
                                   last_error_code, occurred_at, updated_at, version)
    SELECT 'bench', 'BenchNoop', jsonb_build_object('n', i), 'REVIEW_REQUIRED', 8, now(), 'HTTP_422', now(), now(), 17
    FROM generate_series(1, 100000) AS i;"
  sql bench_growth "VACUUM ANALYZE"
  s_growth_empty() {
    outboxd_throughput growth-empty "growth: outboxd tuned, no-op, empty table" \
      noop BenchNoop 1 bench_template "${tuned_env[@]}"
  }
  s_growth_filled() {
    outboxd_throughput growth-filled "growth: same, table holds 1M COMPLETED + 100k REVIEW" \
      noop BenchNoop 1 bench_growth "${tuned_env[@]}"
  }
  scenarios+=(s_growth_empty s_growth_filled)
  # Review F8: one REVIEW_REQUIRED event and 200,000 successors of its aggregate, due an hour
  # before the drain's events. The claim walks due events oldest first; hosts park the
  # successors (next_attempt_at 'infinity') so that it reads past none of them.
  log "pre-filling a template with one REVIEW_REQUIRED event holding back 200,000 successors"
  fresh_db bench_blocked bench_template
  sql bench_blocked "
    INSERT INTO event_publication (company_id, event_type, aggregate_key, aggregate_seq, payload, status, attempt_count,
                                   next_attempt_at, last_error_code, occurred_at, updated_at, version)
    SELECT 'bench', 'BenchNoop', 'held-back', i, jsonb_build_object('n', i),
           CASE WHEN i = 1 THEN 'REVIEW_REQUIRED' ELSE 'PENDING' END, CASE WHEN i = 1 THEN 8 ELSE 0 END,
           now() - interval '1 hour', CASE WHEN i = 1 THEN 'HTTP_422' END, now() - interval '1 hour', now(), 1
    FROM generate_series(1, 200001) AS i"
  sql bench_blocked "VACUUM ANALYZE"
fi

# ---- several hosts on one database -----------------------------------------------------

if want hosts; then
  hosts_scenario() {
    outboxd_throughput "hosts-$1" "hosts: $1 × outboxd tuned, no-op, one database" \
      noop BenchNoop "$1" bench_template "${tuned_env[@]}"
  }
  s_hosts_1() { hosts_scenario 1; }
  s_hosts_2() { hosts_scenario 2; }
  s_hosts_4() { hosts_scenario 4; }
  scenarios+=(s_hosts_1 s_hosts_2 s_hosts_4)
fi

# ---- through PgBouncer in transaction mode ----------------------------------------------

if want pgbouncer; then
  bouncer_port=$("$root/scripts/pg.sh" free-port)
  bouncer_dir=$work/pgbouncer
  mkdir -p "$bouncer_dir" && chmod 755 "$work" "$bouncer_dir"
  printf '"postgres" ""\n' >"$bouncer_dir/userlist.txt"
  printf '[databases]\n* = host=127.0.0.1 port=%s user=postgres\n[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = %s\nunix_socket_dir =\nauth_type = trust\nauth_file = %s\npool_mode = transaction\ndefault_pool_size = 20\nmax_client_conn = 500\n' \
    "$port" "$bouncer_port" "$bouncer_dir/userlist.txt" >"$bouncer_dir/pgbouncer.ini"
  bouncer_user=()
  ((EUID == 0)) && bouncer_user=(-u postgres)
  # pgbouncer_throughput KEY DESCRIPTION: the write scenario with PgBouncer started for the
  # run only (its idle server connections would keep the next run's DROP DATABASE waiting).
  pgbouncer_throughput() {
    local bouncer_pid
    pgbouncer "${bouncer_user[@]}" "$bouncer_dir/pgbouncer.ini" >>"$results_dir/logs/pgbouncer.log" 2>&1 &
    bouncer_pid=$!
    for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$bouncer_port") 2>/dev/null && break; sleep 0.1; done
    outboxd_throughput "$1" "$2" write BenchWrite 1 bench_template OUTBOX_DATABASE_URL="postgresql://postgres@127.0.0.1:$bouncer_port/bench_run" \
      OUTBOX_DATABASE_POOL_MODE=transaction OUTBOX_DATABASE_SESSION_URL="$base/bench_run"
    kill -TERM "$bouncer_pid" && wait "$bouncer_pid" || true
  }
  s_pgbouncer_direct() {
    outboxd_throughput pgbouncer-direct "direct: outboxd defaults, writes 1 row via ctx.db()" write BenchWrite 1 bench_template
  }
  s_pgbouncer_direct_tx() {
    outboxd_throughput pgbouncer-direct-tx "direct, database.pool_mode transaction (no prepared statements)" \
      write BenchWrite 1 bench_template OUTBOX_DATABASE_POOL_MODE=transaction
  }
  s_pgbouncer_pooled() { pgbouncer_throughput pgbouncer-pooled "through PgBouncer (transaction mode, pool 20), same"; }
  scenarios+=(s_pgbouncer_direct s_pgbouncer_direct_tx s_pgbouncer_pooled)
fi

# ---- the runs: every scenario once per round --------------------------------------------

for ((run = 1; run <= runs; run++)); do
  for scenario in "${scenarios[@]}"; do "$scenario"; done
done
if want growth; then
  statement_plans bench_template empty
  statement_plans bench_growth growth
  statement_plans bench_blocked blocked \
    "(SELECT count(*) FROM event_publication WHERE next_attempt_at = 'infinity') = 200000"
fi
count_log_problems
record meta machine "Machine: one client commits $commits_at_start single-row transactions/s at the start and $(commit_rate) at the end (WAL flush bound); load average at start: $load_at_start" ""

record note load "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine makes the figures noisy)." ""
"$tool" report "$results" | tee "$results_dir/report.txt"
# claim_cost PLAN: "<ms> <rows>": the claim's time and the due rows its walk read (those
# it took and those its ordering filter passed over).
claim_cost() {
  awk 'NR == 1 { ms = $0; sub(/.*; /, "", ms); sub(/ ms.*/, "", ms) }
       /Index Scan using event_publication_due_idx/ { walk = 1; r = $0; sub(/.* rows=/, "", r); sub(/ .*/, "", r); rows += r; next }
       walk && /Rows Removed by Filter:/ { f = $0; sub(/.*: /, "", f); rows += f; walk = 0 }
       walk && /->/ { walk = 0 }
       END { printf "%s %d\n", ms, rows }' "$1"
}
{
  for label in empty growth blocked; do
    plan=$results_dir/plan-$label-claim.txt
    [[ -e "$plan" ]] || continue
    read -r ms rows < <(claim_cost "$plan")
    printf 'Claim, %s table: %s ms, %s due rows read\n' "$label" "$ms" "$rows"
  done
  if [[ -e "$results_dir/plan-empty-claim.txt" && -e "$results_dir/plan-blocked-claim.txt" ]]; then
    read -r empty_ms _ < <(claim_cost "$results_dir/plan-empty-claim.txt")
    read -r blocked_ms _ < <(claim_cost "$results_dir/plan-blocked-claim.txt")
    awk -v b="$blocked_ms" -v e="$empty_ms" 'BEGIN { if (e > 0) printf "Claim behind 200,000 held-back successors: %.2f x the empty table'"'"'s\n", b / e }'
  fi
  for plan in "$results_dir"/plan-*.txt; do
    [[ -e "$plan" ]] || continue
    name=$(basename "$plan" .txt)
    printf '\nPlan of the %s statement, %s table %s\n' "${name##*-}" "$(cut -d- -f2 <<<"$name")" "$(head -n 1 "$plan")"
    tail -n +2 "$plan"
  done
} | tee -a "$results_dir/report.txt"
log "table, records and logs: $results_dir"
