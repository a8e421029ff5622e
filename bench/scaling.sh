#!/usr/bin/env bash
# The measured scaling model (bench/run.sh --scaling runs this): what one event costs the
# PostgreSQL server, per event, for a no-op handler and a handler writing one row through
# ctx.db(); docs/high-availability.md#scaling-model turns the figures into capacity.
#
#   bench/run.sh --scaling [--n N] [--rate R] [--build-dir DIR]
#
#   --n N            events per run (default 20,000)
#   --rate R         events/s the application publishes while one host (defaults) drains
#                    them (default 500): a steady flow, not a backlog, so claims are as small
#                    as in production at that rate
#   --build-dir DIR  add the bench targets to this already configured build tree and use its
#                    outboxd (default: a Release build in OUTBOX_BENCH_BUILD_DIR or build-bench/)
#
# Runs, each in a new database of one throwaway PostgreSQL 15 cluster (defaults, fsync on,
# plus pg_stat_statements through shared_preload_libraries):
#   publish       N events, each published by outbox_publish() in its own transaction
#                 (pgbench, 2 clients, as fast as they go), no host running
#   *-flow        the same publishing at R events/s while one `outboxd run` with default
#                 settings handles them (BenchNoop, BenchWrite), until every event is
#                 COMPLETED: events arrive one by one, so claims are small
#   *-backlog     N events published first (not measured), then one host with default
#                 settings started that drains them: claims are full batches (batch_size 20)
# Per run and per event: PostgreSQL CPU time (utime + stime of the postmaster and all its
# processes, from /proc, backends that exited included), WAL bytes (pg_current_wal_lsn()
# before and after), statements (pg_stat_statements calls, top level; every statement
# outboxd and pgbench send is one round trip: no pipelining), committed transactions
# (pg_stat_database.xact_commit, read after the host stopped, a few shutdown transactions
# included) and the host's own CPU; the connections the host held
# (pg_stat_activity). The application and the host connect as different roles, so their
# statements are counted apart; the test's own progress polls (one a second) are not
# counted as statements but are in the CPU and WAL figures (they write nothing).
# Prints one table; records and logs are left in <build dir>/scaling-results/.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${OUTBOX_BENCH_BUILD_DIR:-$root/build-bench}
n=20000
rate=500
reuse_build=0
while (($#)); do
  case "$1" in
    --n) n=$2; shift ;;
    --rate) rate=$2; shift ;;
    --build-dir) build_dir=$(cd "$2" && pwd); reuse_build=1; shift ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "scaling.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ "$n" =~ ^[0-9]+$ && "$rate" =~ ^[0-9]+$ ]] && ((n >= 2 && rate >= 1)) ||
  { echo "scaling.sh: --n and --rate take whole numbers (n >= 2)" >&2; exit 2; }
n=$((n / 2 * 2))  # two publishing clients

log() { echo "scaling: $*" >&2; }

log "building into $build_dir"
bench_script=scaling.sh
results_dir=$build_dir/scaling-results
# shellcheck source=bench/build.sh
source "$root/bench/build.sh"


pg_dir=$(mktemp -d /tmp/outbox-scaling-pg.XXXXXX)
work=$(mktemp -d /tmp/outbox-scaling.XXXXXX)
host_pid=
cleanup() {
  [[ -n "$host_pid" ]] && kill -TERM "$host_pid" 2>/dev/null || true
  cp "$pg_dir/log" "$results_dir/logs/postgresql.log" 2>/dev/null || true
  "$root/scripts/pg.sh" stop "$pg_dir" || true
  rm -rf "$work"
}
trap cleanup EXIT

port=$("$root/scripts/pg.sh" free-port)
server=$("$root/scripts/pg.sh" start "$pg_dir" "$port")
base=${server%/postgres}
host_base=${base/postgres@/outboxd_bench@}
sql() { PGOPTIONS='-c client_min_messages=warning' psql -X -q -At -v ON_ERROR_STOP=1 -d "$base/$1" -c "$2"; }

# pg_stat_statements needs a restart to load (pg.sh's rules: the postgres user when root).
sql postgres "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'"
pg_bin=${PG_BIN:-/usr/lib/postgresql/15/bin}
[[ -x $pg_bin/pg_ctl ]] || pg_bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
as=()
((EUID == 0)) && as=(runuser -u postgres --)
"${as[@]}" "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/log" -w -t 60 restart >/dev/null
postmaster=$(head -n 1 "$pg_dir/data/postmaster.pid")
pg_version=$(sql postgres "SHOW server_version")
log "PostgreSQL $pg_version at $base"

# The host's own role (superuser like the bench's, so nothing else differs), to count its
# statements apart from the application's.
sql postgres "CREATE ROLE outboxd_bench LOGIN SUPERUSER"
sql postgres "CREATE DATABASE scaling_template"
OUTBOX_DATABASE_URL=$base/scaling_template "$outboxd" migrate >"$results_dir/logs/migrate.log" 2>&1
sql scaling_template "CREATE TABLE bench_effect (event_id uuid PRIMARY KEY, written_at timestamptz NOT NULL DEFAULT now())"
sql scaling_template "CREATE EXTENSION pg_stat_statements"

wal_lsn() { sql "$1" "SELECT pg_current_wal_lsn()"; }
commits() { sql "$1" "SELECT xact_commit FROM pg_stat_database WHERE datname = '$1'"; }
statements_of() { sql "$1" "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid
                            WHERE r.rolname = '$2' AND s.dbid = (SELECT oid FROM pg_database WHERE datname = '$1')"; }
proc_cpu() {  # seconds of utime + stime of one live process
  awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%.3f", ($12 + $13) / hz }' "/proc/$1/stat"
}

start_host() {  # LABEL PLUGIN DB: one `outboxd run` with default settings, as the host role
  env OUTBOX_DATABASE_URL="$host_base/$3" OUTBOX_PLUGIN_DIR="$plugins/$2" OUTBOX_ADMIN_LISTEN=off \
    OUTBOX_HOST_ID="scaling-$1" "$outboxd" run >"$results_dir/logs/$1-host.log" 2>&1 &
  host_pid=$!
}
await_host() {  # LABEL
  for _ in $(seq 1 300); do
    grep -q " started as " "$results_dir/logs/$1-host.log" 2>/dev/null && break
    kill -0 "$host_pid" 2>/dev/null || break
    sleep 0.1
  done
  grep -q " started as " "$results_dir/logs/$1-host.log" ||
    { echo "scaling.sh: outboxd did not start; its log:" >&2; cat "$results_dir/logs/$1-host.log" >&2; exit 1; }
}

# run LABEL MODE PLUGIN TYPE: a fresh database, N events of TYPE; records one line of totals
# over the measured part. MODE publish: publishing flat out, no host. flow: one host (plugin
# PLUGIN) running while the events are published at --rate, until every event is COMPLETED.
# backlog: the events published first (not measured), then one host started that drains
# them: claims are full batches.
run() {
  local kind=$1 mode=$2 plugin=$3 type=$4 db=scaling_${1//-/_} wal0 wal1 commits0 commits1 host_cpu=0 conns=0 start end
  local rate_args=() out
  sql postgres "DROP DATABASE IF EXISTS $db" >/dev/null
  sql postgres "CREATE DATABASE $db TEMPLATE scaling_template STRATEGY FILE_COPY"
  printf "SELECT outbox_publish('bench', '%s', jsonb_build_object('n', :client_id));\n" "$type" >"$work/publish.sql"
  if [[ "$mode" == backlog ]]; then
    pgbench -n -c 2 -j 2 -t "$((n / 2))" -f "$work/publish.sql" "$base/$db" >"$results_dir/logs/$kind-pgbench.log" 2>&1 ||
      { cat "$results_dir/logs/$kind-pgbench.log" >&2; exit 1; }
  fi
  sql "$db" "CHECKPOINT"
  if [[ "$mode" == flow ]]; then
    start_host "$kind" "$plugin" "$db"
    await_host "$kind"
    rate_args=(-R "$rate")
  fi
  sql "$db" "SELECT pg_stat_statements_reset()" >/dev/null
  wal0=$(wal_lsn "$db")
  commits0=$(commits "$db")
  [[ "$mode" == flow ]] && host_cpu=$(proc_cpu "$host_pid")
  start=$(date +%s.%N)
  # Started here, it is measured from its first statement.
  [[ "$mode" == backlog ]] && start_host "$kind" "$plugin" "$db"
  # The cluster's CPU around publishing and draining (outbox_bench cpu measures the command).
  out=$("$tool" cpu --postmaster "$postmaster" -- bash -c '
      if [[ "$5" != backlog ]]; then
        pgbench -n -c 2 -j 2 -t "$1" "${@:6}" -f "$2" "$3" >"$4" 2>&1 || { cat "$4" >&2; exit 1; }
      fi
      [[ "$5" != publish ]] || exit 0
      for _ in $(seq 1 1800); do
        left=$(psql -X -At -d "$3" -c "SELECT count(*) FROM event_publication WHERE status <> '"'COMPLETED'"'")
        [[ "$left" == 0 ]] && exit 0
        sleep 1
      done
      echo "scaling.sh: events left after 30 minutes" >&2; exit 1
    ' drain "$((n / 2))" "$work/publish.sql" "$base/$db" "$results_dir/logs/$kind-pgbench.log" "$mode" "${rate_args[@]}")
  end=$(date +%s.%N)
  wal1=$(wal_lsn "$db")
  if [[ -n "$host_pid" ]]; then
    host_cpu=$(awk -v a="$host_cpu" -v b="$(proc_cpu "$host_pid")" 'BEGIN { printf "%.3f", b - a }')
    conns=$(sql "$db" "SELECT count(*) FROM pg_stat_activity WHERE usename = 'outboxd_bench'")
    kill -TERM "$host_pid"
    wait "$host_pid" || log "outboxd exited with status $?"
    host_pid=
  fi
  # Read once the host's sessions ended: a backend reports its transaction counts when it
  # exits, or up to 10 s after it went idle.
  commits1=$(commits "$db")
  local cpu_pg wal stmts_host stmts_app events
  cpu_pg=$(sed -n 's/.*cpu_pg_s=\([0-9.]*\).*/\1/p' <<<"$out")
  wal=$(sql "$db" "SELECT pg_wal_lsn_diff('$wal1', '$wal0')::bigint")
  stmts_host=$(statements_of "$db" outboxd_bench)
  stmts_app=$(statements_of "$db" postgres)
  events=$(sql "$db" "SELECT count(*) FROM event_publication WHERE status = 'COMPLETED' OR '$mode' = 'publish'")
  ((events == n)) || { echo "scaling.sh: $kind: $events events instead of $n" >&2; exit 1; }
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$kind" "$n" "$cpu_pg" "$wal" "$stmts_host" "$stmts_app" \
    "$((commits1 - commits0))" "$host_cpu" "$conns" "$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')" \
    >>"$results"
  log "$kind: $(tail -n 1 "$results")"
}

run publish publish noop BenchNoop
run noop-flow flow noop BenchNoop
run write-flow flow write BenchWrite
run noop-backlog backlog noop BenchNoop
run write-backlog backlog write BenchWrite

{
  echo "Scaling model: N = $n events per run, PostgreSQL $pg_version (defaults, fsync on), $(nproc) cores,"
  echo "one outboxd host with default settings, publishing at $rate events/s; load average $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  awk -F'\t' -v rate="$rate" '
    function label(k) {
      if (k == "publish") return "publish only (no host)"
      if (k ~ /-flow$/) return (k ~ /^noop/ ? "no-op" : "one row") ", published at " rate "/s: both"
      return (k ~ /^noop/ ? "no-op" : "one row") ", backlog: processing"
    }
    { kind[NR] = $1; n = $2; cpu[NR] = $3; wal[NR] = $4; sh[NR] = $5; sa[NR] = $6; tx[NR] = $7; hc[NR] = $8; cn[NR] = $9; secs[NR] = $10 }
    END {
      printf "%-38s %10s %10s %11s %10s %8s %12s %6s %8s\n", "per event", "pg CPU us", "WAL bytes", "host stmts", "app stmts", "commits", "host CPU us", "conns", "seconds"
      for (i = 1; i <= NR; i++) {
        printf "%-38s %10.0f %10.0f %11.2f %10.2f %8.2f %12.0f %6d %8.1f\n", label(kind[i]),
          cpu[i] / n * 1e6, wal[i] / n, sh[i] / n, sa[i] / n, tx[i] / n, hc[i] / n * 1e6, cn[i], secs[i]
      }
      # A flow run minus the publish-only run: what processing alone cost at that rate.
      for (i = 2; i <= NR; i++) {
        if (kind[i] !~ /-flow$/) continue
        printf "%-38s %10.0f %10.0f %11.2f %10s %8.2f\n", (kind[i] ~ /^noop/ ? "no-op" : "one row") ", at " rate "/s: processing",
          (cpu[i] - cpu[1]) / n * 1e6, (wal[i] - wal[1]) / n, sh[i] / n, "-", (tx[i] - tx[1]) / n
      }
    }' "$results"
} | tee "$results_dir/report.txt"
log "table, records and logs: $results_dir"
