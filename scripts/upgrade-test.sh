#!/usr/bin/env bash
# Rolling-upgrade test: the previous release's hosts keep processing while this tree's
# migrations are applied, then are replaced one at a time by this tree's hosts.
#   scripts/upgrade-test.sh [BUILD_DIR]      (default: build/, must hold this tree's outboxd)
# The previous release (PREV below) is built once under BUILD_DIR/upgrade-prev/ and
# reused by later runs. It needs the commit in this clone's history: a shallow clone fails
# with a message saying so. A PostgreSQL is started on a free loopback port and stopped.
# Bounded: every wait below has a deadline; the stage takes about 40 s once the previous
# release is built (building it the first time: 5 to 15 minutes on 2 cores).
# On failure the hosts' logs are kept and their directory named (OUTBOX_UPGRADE_KEEP_LOGS=1
# keeps them on success too).
set -euo pipefail

# The commit of the last release (no release tag exists yet): 0.2.0.
PREV=${OUTBOX_PREVIOUS_RELEASE:-66438f9}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${1:-${OUTBOX_BUILD_DIR:-$root/build}}
new_bin=$build_dir/host/outboxd
prev_dir=$build_dir/upgrade-prev/$PREV

fail() { echo "upgrade-test: FAILED: $*" >&2; exit 1; }
say() { echo "upgrade-test: $*" >&2; }

[[ -x $new_bin ]] || fail "$new_bin is missing; build this tree's outboxd first"

# --- the previous release, built once -------------------------------------------------
if ! git -C "$root" cat-file -e "$PREV^{commit}" 2>/dev/null; then
  fail "commit $PREV (the previous release) is not in this clone; a shallow clone lacks it: run 'git fetch --unshallow' (CI clones main with full history)"
fi
if [[ ! -f $prev_dir/src/CMakeLists.txt ]]; then
  rm -rf "$prev_dir/src"
  mkdir -p "$prev_dir/src"
  git -C "$root" archive "$PREV" | tar -x -C "$prev_dir/src"
fi
# shellcheck source=scripts/ccache.sh
source "$root/scripts/ccache.sh"
# Built with scripts/test.sh's flags, as unity batches like this tree's host (268 CPU-seconds
# instead of 488, from scratch). 0.2.0's plugin module defines two file-local names twice,
# so that one module compiles file by file; the hook sets it after 0.2.0's own CMake files ran.
prev_build=$prev_dir/src/build
if [[ ! -x $prev_build/host/outboxd || ! -f $prev_build/tests/fixtures/libfixture_scripted.so ]]; then
  say "building the previous release $PREV (outboxd and the scripted fixture plugin) in $prev_build"
  printf '%s\n' 'cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL set_property TARGET outbox_plugin PROPERTY UNITY_BUILD OFF)' \
    > "$prev_dir/unity-exceptions.cmake"
  cmake -S "$prev_dir/src" -B "$prev_build" "${build_flags[@]}" -DOUTBOX_WERROR=ON \
    -DOUTBOX_BUILD_TESTS=ON -DOUTBOX_BUILD_PLUGINS=OFF -DCMAKE_UNITY_BUILD=ON \
    -DCMAKE_PROJECT_outboxd_INCLUDE="$prev_dir/unity-exceptions.cmake" "${launcher[@]}" >/dev/null
  cmake --build "$prev_build" -j"$(nproc)" --target outboxd fixture_scripted
fi
old_bin=$prev_build/host/outboxd
old_plugin=$prev_build/tests/fixtures/libfixture_scripted.so

# --- a throwaway PostgreSQL and the processes of this run, all stopped on exit ----------
work=$(mktemp -d /tmp/outbox-upgrade.XXXXXX)
# Its own directory: the postgres user must reach it (pg.sh), the work directory is private.
pg_dir=$(mktemp -d /tmp/outbox-upgrade-pg.XXXXXX)
declare -A pids=()
publisher_pid=
cleanup() {
  local pid
  set +e  # every step runs, whatever the one before returned
  if [[ -n $publisher_pid ]]; then
    kill "$publisher_pid" 2>/dev/null
    wait "$publisher_pid" 2>/dev/null
  fi
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    timeout 30 tail --pid="$pid" -f /dev/null || kill -KILL "$pid" 2>/dev/null || true
  done
  "$root/scripts/pg.sh" stop "$pg_dir" >/dev/null 2>&1 || true
  if [[ ${keep_logs:-0} == 1 ]]; then say "host logs kept in $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap "exit 143" TERM INT
keep_logs=1  # until the end is reached

port=$("$root/scripts/pg.sh" free-port)
# Without fsync: nothing here crashes the server or the machine (scripts/pg.sh).
server=$("$root/scripts/pg.sh" start "$pg_dir" "$port" --non-durable)
url=${server%/postgres}/upgrade
psql -X -q -v ON_ERROR_STOP=1 "$server" -c "CREATE DATABASE upgrade" >/dev/null
sql() { psql -X -q -t -A -v ON_ERROR_STOP=1 "$url" -c "$1"; }

mkdir -p "$work/plugins"
# The previous release's fixture plugin serves both releases: a plugin built against the
# older SDK keeps loading in newer hosts. Its handler writes one scripted_effect row through
# ctx.db() in the transaction that records its success, and fails retryably while the
# event's attempt <= fail_times.
cp "$old_plugin" "$work/plugins/libscripted.so"

host_env=(OUTBOX_DATABASE_URL="$url" OUTBOX_PLUGIN_DIR="$work/plugins" OUTBOX_ADMIN_LISTEN=off
  OUTBOX_POLL_INTERVAL=200ms OUTBOX_LEASE_DURATION=5s OUTBOX_INITIAL_BACKOFF=100ms OUTBOX_MAX_BACKOFF=1s
  OUTBOX_MAX_ATTEMPTS=8 OUTBOX_CONCURRENCY=4 OUTBOX_SHUTDOWN_TIMEOUT=10s)

start_host() {  # NAME BINARY
  env "${host_env[@]}" OUTBOX_HOST_ID="$1" "$2" run >"$work/$1.log" 2>&1 &
  pids[$1]=$!
}
stop_host() {  # NAME: SIGTERM, then its exit code must be 0
  local pid=${pids[$1]} code=0
  kill -TERM "$pid"
  wait "$pid" || code=$?
  unset "pids[$1]"
  ((code == 0)) || fail "host $1 exited with $code on SIGTERM; its log: $work/$1.log"
}
wait_for() {  # SECONDS DESCRIPTION SQL-returning-t
  local deadline=$((SECONDS + $1))
  until [[ $(sql "$3") == t ]]; do
    ((SECONDS < deadline)) || fail "timed out after $1 s waiting until $2"
    sleep 0.5
  done
}
completed() { sql "SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'"; }
# Error-level lines of host logs (both releases log "<time> error <message>"); a schema the
# other release cannot live with shows here first, e.g. "fleet registry failed: SQL error
# (SQLSTATE 23514)".
error_lines() { grep -H -E '^[^ ]+ (error|critical) ' "$@" || true; }

# --- the previous release's schema, and a current host refusing it -------------------
"$old_bin" --version >&2 || true
prev_release=$("$old_bin" --version | sed -n 's/^outboxd \([0-9][0-9.]*\).*/\1/p' | head -n 1)
env "${host_env[@]}" "$old_bin" migrate >"$work/migrate-previous.log" 2>&1 ||
  fail "the previous release's migrate failed: $(cat "$work/migrate-previous.log")"
prev_schema=$(sql "SELECT max(version) FROM outbox_schema_history")
say "database at the previous release's schema $prev_schema"
sql "CREATE TABLE scripted_effect (event_id uuid NOT NULL, handler_name text NOT NULL, attempt int NOT NULL,
       at timestamptz NOT NULL DEFAULT clock_timestamp())" >/dev/null

code=0
env "${host_env[@]}" OUTBOX_HOST_ID=refused OUTBOX_DATABASE_STARTUP_TIMEOUT=10s timeout 60 "$new_bin" run \
  >"$work/refused.log" 2>&1 || code=$?
((code == 1)) || fail "a current host on the previous release's schema exited with $code, expected 1: $(cat "$work/refused.log")"
grep -q "the database schema is at version $prev_schema but this outboxd .* needs version .*: run \`outboxd migrate\`" \
  "$work/refused.log" || fail "a current host on the previous schema did not say what to do: $(cat "$work/refused.log")"
say "a current host refuses the previous schema (exit 1): $(grep -o 'the database schema is at version.*' "$work/refused.log")"

# --- three previous-release hosts and a stream of events with retries ------------------
for n in 1 2 3; do start_host "old-$n" "$old_bin"; done
# Batches of 10 every 0.3 s until told to stop; one event in three fails once, one in three
# twice before it succeeds. Half of them belong to one of 4 aggregates, so their successors
# wait behind failing heads: the hosts of this release park them and every host's
# finishes release them, and the effects must follow each aggregate's order.
publish_loop() {
  local batch=0
  while [[ ! -e $work/stop-publishing ]]; do
    psql -X -q -v ON_ERROR_STOP=1 "$url" -c "SELECT outbox_publish('upgrade-co', 'TestRequested',
        jsonb_build_object('db', true, 'fail_times', (g + $batch) % 3),
        CASE WHEN g % 2 = 0 THEN 'agg-' || (g / 2 % 4) END) FROM generate_series(1, 10) AS g" \
      >/dev/null 2>>"$work/publisher.log" || echo "publish failed" >>"$work/publisher.log"
    batch=$((batch + 1))
    sleep 0.3
  done
}
publish_loop &
publisher_pid=$!
wait_for 60 "the previous release's hosts have completed 50 events" \
  "SELECT count(*) >= 50 FROM event_publication WHERE status = 'COMPLETED'"
wait_for 30 "3 previous-release hosts are live" \
  "SELECT count(*) = 3 FROM outbox_host WHERE stopped_at IS NULL AND host_id LIKE 'old-%'"

# --- this release's migrations while they run ---------------------------------------
code=0
env "${host_env[@]}" timeout 120 "$new_bin" migrate >"$work/migrate-current.log" 2>&1 || code=$?
cat "$work/migrate-current.log" >&2
((code == 0)) || fail "this release's migrate exited with $code while the previous release's hosts run (4: a migration is not online): $(cat "$work/migrate-current.log")"
new_schema=$(sql "SELECT max(version) FROM outbox_schema_history")
say "database migrated from $prev_schema to $new_schema while 3 previous-release hosts run"
migrated_at=$(sql "SELECT now()")
# The previous release keeps working on the new schema: events published after the
# migration are completed while only its hosts run.
wait_for 60 "the previous release's hosts completed 30 events published after the migration" \
  "SELECT count(*) >= 30 FROM event_publication WHERE status = 'COMPLETED' AND occurred_at > '$migrated_at'"
# A delayed event published now is honoured by the previous release's claim (it takes only
# rows whose next_attempt_at has passed): no attempt before its time, one effect after it.
delayed=$(sql "SELECT outbox_publish('upgrade-co', 'TestRequested', jsonb_build_object('db', true, 'fail_times', 0),
                 deliver_after => now() + interval '3 seconds')")
# One statement reads the clock and the row together: checked in two, a claim made just
# after deliver_after passed between them looked like an early one (seen once on a loaded
# machine). A claim committed after this statement's start is not in its snapshot, and a
# claim before deliver_after would be.
while true; do
  state=$(sql "SELECT CASE WHEN now() >= deliver_after THEN 'due'
                           WHEN status = 'PENDING' AND attempt_count = 0 THEN 'waiting'
                           ELSE 'claimed early' END
               FROM event_publication WHERE event_id = '$delayed'")
  [[ $state == due ]] && break
  [[ $state == waiting ]] || fail "a previous-release host claimed a delayed event before its deliver_after"
  sleep 0.2
done
wait_for 30 "the previous release's hosts completed the delayed event after its time" \
  "SELECT status = 'COMPLETED' AND (SELECT min(at) FROM scripted_effect WHERE event_id = '$delayed') >= deliver_after
   FROM event_publication WHERE event_id = '$delayed'"
say "the previous release's hosts honour deliver_after on the new schema"
sleep 2  # two more heartbeats of the old hosts on the new schema
errors=$(error_lines "$work"/old-*.log)
[[ -z $errors ]] || fail "a previous-release host logged an error on this release's schema (a migration is not compatible with it): $errors"
wait_for 10 "the 3 previous-release hosts are still live in the fleet view on the new schema" \
  "SELECT count(*) = 3 FROM outbox_host WHERE host_id LIKE 'old-%' AND stopped_at IS NULL
     AND last_heartbeat_at > now() - 3 * heartbeat_interval_ms * interval '1 millisecond'"

# --- replace the hosts one at a time while events keep flowing -------------------------
for n in 1 2 3; do
  stop_host "old-$n"
  start_host "new-$n" "$new_bin"
  wait_for 30 "host new-$n registered live with schema $new_schema" \
    "SELECT count(*) = 1 FROM outbox_host WHERE host_id = 'new-$n' AND stopped_at IS NULL AND schema_needed = $new_schema"
  before=$(completed)
  wait_for 60 "30 more events completed after new-$n joined" "SELECT count(*) >= $before + 30 FROM event_publication WHERE status = 'COMPLETED'"
  if ((n == 1)); then
    env "${host_env[@]}" "$new_bin" status >"$work/status-mixed.log" 2>&1 || fail "outboxd status failed: $(cat "$work/status-mixed.log")"
    grep -q "^releases: .* on 1 live host (schema $new_schema); $prev_release on 2 live hosts " "$work/status-mixed.log" ||
      fail "outboxd status does not show the mixed fleet's releases: $(grep releases "$work/status-mixed.log")"
    say "mixed fleet: $(grep '^releases:' "$work/status-mixed.log")"
  fi
done

touch "$work/stop-publishing"
wait "$publisher_pid" || true
publisher_pid=
[[ ! -s $work/publisher.log ]] || fail "publishing failed during the upgrade: $(head -5 "$work/publisher.log")"
wait_for 120 "every event is COMPLETED" \
  "SELECT count(*) = 0 FROM event_publication WHERE status <> 'COMPLETED'"
for n in 1 2 3; do stop_host "new-$n"; done

# --- the outcome -------------------------------------------------------------------------
events=$(sql "SELECT count(*) FROM event_publication")
not_one=$(sql "SELECT count(*) FROM event_publication e
               WHERE (SELECT count(*) FROM scripted_effect s WHERE s.event_id = e.event_id) <> 1")
stray=$(sql "SELECT count(*) FROM scripted_effect s WHERE NOT EXISTS
               (SELECT 1 FROM event_publication e WHERE e.event_id = s.event_id)")
retried=$(sql "SELECT count(*) FROM event_publication WHERE attempt_count > 1")
((not_one == 0 && stray == 0)) || fail "$not_one of $events events do not have exactly one effect ($stray effects of unknown events)"
((retried > 0)) || fail "no event was retried; the stream must exercise retries"
# Each aggregate's effects (written in the handler's transaction, which commits before the
# next event of the aggregate may start) follow its positions.
out_of_order=$(sql "SELECT count(*) FROM (
                      SELECT e.aggregate_seq, s.at, lag(s.at) OVER (PARTITION BY e.aggregate_key ORDER BY e.aggregate_seq) AS before
                      FROM event_publication e JOIN scripted_effect s ON s.event_id = e.event_id
                      WHERE e.aggregate_seq IS NOT NULL) o WHERE o.at < o.before")
keyed=$(sql "SELECT count(*) FROM event_publication WHERE aggregate_seq IS NOT NULL")
((keyed > 0 && out_of_order == 0)) || fail "$out_of_order of $keyed keyed events ran before an earlier event of their aggregate"
# No host, of either release, logged a schema problem or any other error.
if grep -n -i -E 'schema is at version|needs hosts of schema|SQLSTATE (42|0A)|does not exist|undefined (column|function)' \
  "$work"/old-*.log "$work"/new-*.log >&2; then
  fail "a host logged a schema error (lines above)"
fi
errors=$(error_lines "$work"/old-*.log "$work"/new-*.log)
[[ -z $errors ]] || fail "a host logged an error during the upgrade: $errors"
say "passed: $events events, all COMPLETED with exactly one effect each ($retried retried), schema $prev_schema -> $new_schema, hosts replaced one at a time"
keep_logs=${OUTBOX_UPGRADE_KEEP_LOGS:-0}
