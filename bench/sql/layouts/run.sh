#!/usr/bin/env bash
# Storage layout prototypes, pure SQL: for each candidate, N events go through its whole
# lifecycle on one throwaway PostgreSQL 15 cluster (pg_stat_statements preloaded):
#   publish    N × its publish function, one event per transaction (pgbench, 2 clients,
#              synchronous_commit off: the flush belongs to the application's transaction)
#   process    claim up to BATCH events, then finish them all, each statement its own
#              transaction (pgbench -M prepared, CLIENTS clients), until the queue is empty
#   retention  today: the host's DELETE batches of 1,000; partitioned candidates: DROP of
#              the partitions whose range holds no unfinished event
# Each phase prints PostgreSQL CPU per event (/proc of the postmaster and its processes),
# WAL bytes per event, by record type and relation (pg_waldump), B-tree entries and
# statements per event, and each statement's share (pg_stat_statements). Candidates run
# interleaved, ROUNDS times. With GRAPHILE_DIR (a folder where `npm install` put
# bench/peers/package.json's packages, with bench/peers/*.mjs copied in) graphile-worker
# runs in every round too: add_job per event, then its worker at the settings of
# bench/run.sh's best (64, pool 66, localQueue 1000, completeJobBatchDelay 0).
#
#   bench/sql/layouts/run.sh --outboxd PATH [--n N] [--rounds R] [--batch B] [--clients C]
#                            [--only a_today,b_queue_history,...] [--publish-per-tx K] [--publish-only]
#
# --publish-per-tx K puts K publishes in each transaction (default 1): with K = 100 the
# publish figures are the events' own cost, not that of a transaction per event.
# --publish-only stops each lifecycle after the publish phase.
#
# PATH is an outboxd binary (for `outboxd migrate`; every candidate is built on the
# migrated schema and reuses its helper functions). Leaves the logs and summary.tsv in
# $LAYOUTS_OUT (default /tmp/layouts-results).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
n=100000 rounds=2 batch=1000 clients=2 outboxd= only= per_tx=1 publish_only=0
candidates=(a_today b_queue_history c_split d_hot e_lean f_hot_archive g_lean_finish)
while (($#)); do
  case "$1" in
    --outboxd) outboxd=$2; shift ;;
    --n) n=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --batch) batch=$2; shift ;;
    --clients) clients=$2; shift ;;
    --only) IFS=, read -r -a candidates <<<"$2"; shift ;;
    --publish-per-tx) per_tx=$2; shift ;;
    --publish-only) publish_only=1 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
[[ -x "$outboxd" ]] || { echo "run.sh: --outboxd PATH is required" >&2; exit 2; }
out=${LAYOUTS_OUT:-/tmp/layouts-results}
mkdir -p "$out"
summary=$out/summary.tsv
: >"$summary"

pg_dir=$(mktemp -d /tmp/layouts-pg.XXXXXX)
worker_pid=
cleanup() {
  [[ -n "$worker_pid" ]] && kill -TERM "$worker_pid" 2>/dev/null || true
  "$root/scripts/pg.sh" stop "$pg_dir" || true
}
trap cleanup EXIT
port=$("$root/scripts/pg.sh" free-port)
"$root/scripts/pg.sh" start "$pg_dir" "$port" >/dev/null
as_owner() { if ((EUID == 0)); then runuser -u postgres -- "$@"; else "$@"; fi; }
as_owner tee -a "$pg_dir/data/postgresql.conf" >/dev/null <<CONF
shared_preload_libraries = 'pg_stat_statements'
pg_stat_statements.track = all
checkpoint_timeout = 30min
max_wal_size = 20GB
CONF
as_owner "${PG_BIN:-/usr/lib/postgresql/15/bin}/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/log" -w restart >/dev/null
url_base=postgresql://postgres@127.0.0.1:$port
pg_data=$pg_dir/data
postmaster=$(head -n 1 "$pg_data/postmaster.pid")
# shellcheck source=bench/sql/layouts/lib.sh
source "$here/lib.sh"

q postgres "CREATE DATABASE lay_base"
OUTBOX_DATABASE_URL=$url_base/lay_base "$outboxd" migrate >"$out/migrate.log" 2>&1
q lay_base "CREATE EXTENSION pg_stat_statements"
psql -X -q -v ON_ERROR_STOP=1 -d "$url_base/lay_base" -f "$here/common.sql" >/dev/null

# The candidate's schema, with outbox_publish's checks pasted in for @CHECKS@.
load_schema() {
  sed -e "/-- @CHECKS@/r $here/publish_checks.inc" -e '/-- @CHECKS@/d' "$here/$2/schema.sql" |
    sed 's/outbox_publish\.deliver_after/lay_publish.deliver_after/g' |
    psql -X -q -v ON_ERROR_STOP=1 -d "$url_base/$1" >/dev/null
}

# Events left unfinished (must be 0 after processing) and rows left (after retention).
left_sql() {
  case $1 in
    a_today) echo "SELECT count(*) FILTER (WHERE status <> 'COMPLETED') || ' ' || count(*) FROM event_publication" ;;
    b_queue_history | f_hot_archive) echo "SELECT (SELECT count(*) FROM event_publication) || ' ' || (SELECT count(*) FROM event_history)" ;;
    *) echo "SELECT (SELECT count(*) FROM event_queue) || ' ' || (SELECT count(*) FROM event_store) + (SELECT count(*) FROM event_outcome)" ;;
  esac
}

# publish_script FILE: the pgbench script of one transaction, with $per_tx publishes of FILE.
publish_script() {
  local target=$out/publish-$(basename "$(dirname "$1")")-$per_tx.sql i
  if ((per_tx == 1)); then echo "$1"; return; fi
  {
    grep '^\\set' "$1"
    echo 'BEGIN;'
    for ((i = 0; i < per_tx; i++)); do grep -v -e '^\\set' -e '^--' "$1"; done
    echo 'COMMIT;'
  } >"$target"
  echo "$target"
}

candidate() {
  local c=$1 db=lay_$1 per_client=$((n / 2)) cycles t0 t1
  q postgres "DROP DATABASE IF EXISTS $db" >/dev/null
  q postgres "CREATE DATABASE $db TEMPLATE lay_base"
  load_schema "$db" "$c"
  q "$db" "VACUUM ANALYZE" >/dev/null
  q "$db" "CHECKPOINT" >/dev/null

  measure_begin "$db"
  PGOPTIONS='-c synchronous_commit=off' pgbench -n -M prepared -c 2 -j 2 -t "$((per_client / per_tx))" \
    -f "$(publish_script "$here/$c/publish.sql")" "$url_base/$db" >"$out/$c-$round-publish.pgbench" 2>&1
  measure_end "$db" "$c publish r$round" "$((per_client * 2))"
  if ((publish_only)); then q postgres "DROP DATABASE $db" >/dev/null; return; fi
  q "$db" "ANALYZE" >/dev/null

  cycles=$(((n + batch - 1) / batch / clients + 2))
  measure_begin "$db"
  t0=$(date +%s.%N)
  pgbench -n -M prepared -c "$clients" -j "$clients" -t "$cycles" -D batch="$batch" -f "$here/$c/process.sql" \
    "$url_base/$db" >"$out/$c-$round-process.pgbench" 2>&1
  t1=$(date +%s.%N)
  measure_end "$db" "$c process r$round" "$((per_client * 2))"
  echo "  process took $(bc -l <<<"$t1 - $t0" | cut -c1-6) s; unfinished and rows: $(q "$db" "$(left_sql "$c")")"

  q "$db" "ANALYZE" >/dev/null  # as autovacuum would have by then (with the statistics of the publish, today's DELETE batch plan runs past its 30 s timeout)
  measure_begin "$db"
  if [[ $c == a_today ]]; then
    pgbench -n -M prepared -c 1 -t "$((n / 1000 + 2))" -f "$here/$c/retention.sql" "$url_base/$db" >"$out/$c-$round-retention.pgbench" 2>&1
  else
    psql -X -q -v ON_ERROR_STOP=1 -d "$url_base/$db" -f "$here/$c/retention.sql" >/dev/null
  fi
  measure_end "$db" "$c retention r$round" "$((per_client * 2))"
  echo "  after retention, unfinished and rows: $(q "$db" "$(left_sql "$c")")"
  q postgres "DROP DATABASE $db" >/dev/null
}

graphile() {
  local db=lay_graphile per_client=$((n / 2))
  q postgres "DROP DATABASE IF EXISTS $db" >/dev/null
  q postgres "CREATE DATABASE $db"
  q "$db" "CREATE EXTENSION pg_stat_statements"
  (cd "$GRAPHILE_DIR" && node graphile.mjs load --url "$url_base/$db" --n 1) >"$out/graphile-$round-setup.log" 2>&1
  q "$db" "VACUUM ANALYZE" >/dev/null
  q "$db" "CHECKPOINT" >/dev/null
  printf '\\set n random(1, 1000000)\nSELECT graphile_worker.add_job('"'"'bench_noop'"'"', json_build_object('"'"'n'"'"', :n::int));\n' >"$out/graphile-publish.sql"
  measure_begin "$db"
  mkdir -p "$out/graphile" && mv "$out/graphile-publish.sql" "$out/graphile/publish.sql"
  PGOPTIONS='-c synchronous_commit=off' pgbench -n -M prepared -c 2 -j 2 -t "$((per_client / per_tx))" \
    -f "$(publish_script "$out/graphile/publish.sql")" "$url_base/$db" >"$out/graphile-$round-publish.pgbench" 2>&1
  measure_end "$db" "graphile publish r$round" "$((per_client * 2))"
  if ((publish_only)); then q postgres "DROP DATABASE $db" >/dev/null; return; fi
  measure_begin "$db"
  (cd "$GRAPHILE_DIR" && NO_LOG_SUCCESS=1 exec node graphile.mjs work --url "$url_base/$db" --concurrency 64 --max-pool-size 66 \
    --local-queue 1000 --complete-batch-delay 0) >"$out/graphile-$round-worker.log" 2>&1 &
  worker_pid=$!
  local t0 t1
  t0=$(date +%s.%N)
  while [[ $(q "$db" "SELECT EXISTS (SELECT 1 FROM graphile_worker._private_jobs)") == t ]]; do sleep 0.05; done
  t1=$(date +%s.%N)
  kill -TERM "$worker_pid"; wait "$worker_pid" || true; worker_pid=
  measure_end "$db" "graphile process r$round" "$((per_client * 2))"
  echo "  process took $(bc -l <<<"$t1 - $t0" | cut -c1-6) s (worker start-up included)"
  q postgres "DROP DATABASE $db" >/dev/null
}

for ((round = 1; round <= rounds; round++)); do
  for c in "${candidates[@]}"; do candidate "$c" 2>&1 | tee -a "$out/detail.log"; done
  if [[ -n "${GRAPHILE_DIR:-}" ]]; then graphile 2>&1 | tee -a "$out/detail.log"; fi
done
echo
echo "summary (label, PG CPU µs/event, WAL B/event, B-tree entries/event, statements/event):"
column -t -s $'\t' "$summary"
