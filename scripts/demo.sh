#!/usr/bin/env bash
# Runs outboxd with both sample plugins against the example remote services while the
# example application publishes, and prints progress every few seconds.
#
#   scripts/demo.sh [--duration SECONDS]
#
# Installs missing Debian packages (scripts/install-deps.sh), builds into OUTBOX_BUILD_DIR
# (default build/), starts a throwaway PostgreSQL unless OUTBOX_DATABASE_URL is set, runs
# `outboxd migrate` and examples/schema.sql, starts the example AI classifier and stats
# admin server with moderate injected faults, two outboxd hosts (examples/demo.yaml), and
# the example application registering websites (some twice at once) and completing
# missions. When nats-server is installed (scripts/install-deps.sh installs it), a third
# plugin, nats-relay, also relays every MissionCompleted event to a JetStream stream on a
# throwaway nats-server, and the summary checks that the stream holds each completed one
# exactly once. Ctrl-C, or the end of --duration, stops the application, lets the hosts finish
# what was published, stops everything and prints a summary. Every process logs to a file
# in a temp directory whose path is printed. Safe to run again.
set -euo pipefail

usage() {
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}" >&2
  exit 2
}

duration=0
while (($# > 0)); do
  case "$1" in
    --duration)
      (($# >= 2)) && [[ "$2" =~ ^[0-9]+$ ]] || { echo "demo: --duration needs a number of seconds" >&2; exit 2; }
      duration=$2
      shift 2
      ;;
    -h | --help) usage ;;
    *) echo "demo: unknown argument '$1'" >&2; usage ;;
  esac
done

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${OUTBOX_BUILD_DIR:-$root/build}
work=$(mktemp -d /tmp/outboxd-demo.XXXXXX)
log() { printf 'demo: %s\n' "$*"; }
log "logs and generated files: $work"

pids=()        # every background process this script started, stopped in reverse order
pg_dir=""
stop_requested=0
fast_stop=0

cleanup() {
  local status=$?
  trap - INT TERM
  ((${#pids[@]} == 0)) || stop_processes 10 "${pids[@]}"
  if [[ -n "$pg_dir" ]]; then
    "$root/scripts/pg.sh" stop "$pg_dir" || true
  fi
  log "logs kept in $work"
  exit "$status"
}
trap cleanup EXIT
on_interrupt() {
  if ((stop_requested)); then
    fast_stop=1
  fi
  stop_requested=1
}
trap on_interrupt INT TERM

# Started in their own session, so a Ctrl-C in the terminal reaches only this script,
# which then stops them in order.
start_bg() {
  local logfile=$1 pid shell
  shift
  setsid "$@" >"$logfile" 2>&1 &
  pid=$!
  pids+=("$pid")
  # Until the forked shell has exec'd, a signal sent to $pid would be taken by this
  # script's trap in the child and lost: wait for the exec.
  shell=$(readlink -f "$BASH")
  for _ in $(seq 1 100); do
    [[ "$(readlink -f "/proc/$pid/exe" 2>/dev/null || true)" != "$shell" ]] && break
    sleep 0.01
  done
}

# Sends SIGTERM to the given processes and waits up to $1 seconds for them to exit (the
# signal is repeated every 2 seconds), then kills what is left.
stop_processes() {
  local timeout=$1 pid waited=0 alive
  shift
  for pid in "$@"; do kill -TERM "$pid" 2>/dev/null || true; done
  while ((waited < timeout * 10)); do
    alive=()
    for pid in "$@"; do kill -0 "$pid" 2>/dev/null && alive+=("$pid"); done
    ((${#alive[@]} == 0)) && break
    sleep 0.1 || true
    waited=$((waited + 1))
    if ((waited % 20 == 0)); then
      for pid in "${alive[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    fi
  done
  for pid in "$@"; do
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_for_port() {
  local name=$1 port=$2 pid=$3 logfile=$4
  for _ in $(seq 1 100); do
    port_open "$port" && return 0
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "demo: $name exited; its log ($logfile):" >&2
      cat "$logfile" >&2
      exit 1
    fi
    sleep 0.1
  done
  echo "demo: $name is not listening on port $port; see $logfile" >&2
  exit 1
}

free_port() {
  local port
  while true; do
    port=$("$root/scripts/pg.sh" free-port)
    if [[ " ${used_ports[*]:-} " != *" $port "* ]]; then
      used_ports+=("$port")
      echo "$port"
      return
    fi
  done
}
used_ports=()

# --- dependencies and build --------------------------------------------------------------
"$root/scripts/install-deps.sh"
log "building into $build_dir (output: $work/build.log)"
targets=(outboxd category_classification_plugin mission_log_forwarding_plugin ai-classifier admin-stats-server
  outbox-example-app)
with_nats=0
if command -v nats-server >/dev/null; then
  with_nats=1
  targets+=(nats_relay_plugin nats-stream)
fi
if ! { cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DOUTBOX_BUILD_PLUGINS=ON &&
  cmake --build "$build_dir" -j"$(nproc)" --target "${targets[@]}"; } >"$work/build.log" 2>&1; then
  ((stop_requested)) && { log "interrupted"; exit 130; }
  tail -n 40 "$work/build.log" >&2
  echo "demo: build failed; full output in $work/build.log" >&2
  exit 1
fi
if ((stop_requested)); then
  log "interrupted"
  exit 130
fi
outboxd=$build_dir/host/outboxd
app=$build_dir/examples/outbox-example-app
ai_classifier=$build_dir/examples/ai-classifier
admin_server=$build_dir/examples/admin-stats-server

# --- database ----------------------------------------------------------------------------
if [[ -n "${OUTBOX_DATABASE_URL:-}" ]]; then
  database_url=$OUTBOX_DATABASE_URL
  log "using the database in OUTBOX_DATABASE_URL"
else
  # Directly under /tmp: the postgres user must reach it, and socket paths must stay short.
  pg_dir=$(mktemp -u /tmp/outboxd-demo-pg.XXXXXX)
  database_url=$("$root/scripts/pg.sh" start "$pg_dir" "$(free_port)")
  log "started a throwaway PostgreSQL at $database_url"
  log "the hosts connect as its superuser to keep the demo short (each warns once that it has more rights than it needs); production hosts use a runtime role (docs/security.md, \"Database roles\")"
fi
export OUTBOX_DATABASE_URL=$database_url
"$outboxd" migrate >"$work/migrate.log" 2>&1 || { cat "$work/migrate.log" >&2; exit 1; }
psql "$database_url" -v ON_ERROR_STOP=1 -q -f "$root/examples/schema.sql" >"$work/schema.log" 2>&1 ||
  { cat "$work/schema.log" >&2; exit 1; }
# The example's event types: outbox_publish() checks every payload of them from now on.
"$outboxd" event-types apply "$root/examples/event-types.yaml" >"$work/event-types.log" 2>&1 ||
  { cat "$work/event-types.log" >&2; exit 1; }

# --- remote services -----------------------------------------------------------------------
export AI_API_KEY="demo-key-$RANDOM$RANDOM"  # a demo value, shared by the classifier and the hosts
ai_port=$(free_port)
admin_port=$(free_port)
start_bg "$work/ai-classifier.log" "$ai_classifier" --port "$ai_port" --api-key-env AI_API_KEY \
  --latency-ms 30-150 --rate-limit 5 --rate-500 0.02 --rate-503 0.03 --retry-after 2 --rate-timeout 0.01 \
  --rate-lost-drop 0.02 --stall-ms 4000 --seed "$RANDOM"
wait_for_port ai-classifier "$ai_port" "${pids[-1]}" "$work/ai-classifier.log"
start_bg "$work/admin-stats-server.log" "$admin_server" --port "$admin_port" \
  --latency-ms 5-40 --rate-409 0.03 --rate-500 0.03 --rate-503 0.03 --retry-after 1 --rate-timeout 0.01 \
  --rate-lost-drop 0.02 --rate-lost-late 0.02 --stall-ms 3000 --seed "$RANDOM"
wait_for_port admin-stats-server "$admin_port" "${pids[-1]}" "$work/admin-stats-server.log"
log "AI classifier on 127.0.0.1:$ai_port, stats admin server on 127.0.0.1:$admin_port (both with injected faults)"
if ((with_nats)); then
  nats_port=$(free_port)
  nats_url=nats://127.0.0.1:$nats_port
  nats_stream=$build_dir/examples/nats-stream
  start_bg "$work/nats-server.log" nats-server -js -a 127.0.0.1 -p "$nats_port" -sd "$work/nats"
  wait_for_port nats-server "$nats_port" "${pids[-1]}" "$work/nats-server.log"
  # JetStream answers a moment after the port opens.
  for _ in $(seq 1 50); do
    "$nats_stream" create --server "$nats_url" --stream OUTBOX --subject 'outbox.>' >"$work/nats-stream.log" 2>&1 && break
    sleep 0.1
  done
  "$nats_stream" count --server "$nats_url" --stream OUTBOX >/dev/null 2>&1 ||
    { cat "$work/nats-stream.log" >&2; exit 1; }
  log "nats-server (JetStream) on 127.0.0.1:$nats_port with stream OUTBOX; nats-relay relays MissionCompleted to it"
else
  log "nats-server is not installed: the NATS leg (the nats-relay plugin) is left out"
fi

# --- outboxd -------------------------------------------------------------------------------
sed -e "s#http://127.0.0.1:18081#http://127.0.0.1:$ai_port#" -e "s#http://127.0.0.1:18082#http://127.0.0.1:$admin_port#" \
  "$root/examples/demo.yaml" >"$work/outboxd.yaml"
mkdir -m 755 "$work/plugins"
cp "$build_dir/plugins/category-classification/libcategory_classification.so" \
  "$build_dir/plugins/mission-log-forwarding/libmission_log_forwarding.so" "$work/plugins/"
if ((with_nats)); then
  cp "$build_dir/plugins/nats-relay/libnats_relay.so" "$work/plugins/"
  cat >>"$work/outboxd.yaml" <<YAML
  nats-relay:
    timeout: 5s
    config:
      servers: [$nats_url]
      stream: OUTBOX
      event_types: [MissionCompleted]
      publish_timeout: 2s
YAML
fi
for n in 1 2; do
  start_bg "$work/outboxd-$n.log" env OUTBOX_PLUGIN_DIR="$work/plugins" OUTBOX_HOST_ID="demo-host-$n" \
    "$outboxd" run --config "$work/outboxd.yaml"
done
for n in 1 2; do
  for _ in $(seq 1 100); do
    grep -q "started as" "$work/outboxd-$n.log" 2>/dev/null && break
    if ! kill -0 "${pids[-3 + n]}" 2>/dev/null; then
      echo "demo: outboxd host $n exited; its log:" >&2
      cat "$work/outboxd-$n.log" >&2
      exit 1
    fi
    sleep 0.1
  done
done
log "two outboxd hosts running with $work/outboxd.yaml and plugins from $work/plugins"

# --- the application -----------------------------------------------------------------------
tag=$(LC_ALL=C tr -dc a-z </dev/urandom | head -c 6 || true)
start_bg "$work/register-websites.log" "$app" register-websites --tag "$tag" --count 1000000 --duplicates 0.2 \
  --rate 3 --concurrency 2
start_bg "$work/complete-missions.log" "$app" complete-missions --tag "$tag" --count 1000000 --users 20 \
  --rate 15 --concurrency 2
app_pids=("${pids[-2]}" "${pids[-1]}")
host_pids=("${pids[-4]}" "${pids[-3]}")
if ((duration > 0)); then
  log "publishing for ${duration}s (run tag $tag): ~3 website registrations/s (20% registered twice at once), ~15 mission completions/s"
else
  log "publishing until Ctrl-C (run tag $tag): ~3 website registrations/s (20% registered twice at once), ~15 mission completions/s"
fi

# This run's users have numeric ids from first_user on (first_user_id in examples/app/events.hpp:
# the tag's first six letters as a base-26 number, plus one, times a million).
first_user=0
for ((i = 0; i < ${#tag} && i < 6; i++)); do
  first_user=$((first_user * 26 + $(printf '%d' "'${tag:i:1}") - 97))
done
first_user=$(((first_user + 1) * 1000000))
this_run="(payload->>'domain' LIKE 'site-$tag-%' OR CASE WHEN payload->>'user_id' ~ '^[0-9]{1,15}\$'
         THEN (payload->>'user_id')::bigint END BETWEEN $first_user AND $((first_user + 999998)))"

report() {
  "$app" report --database-url "$database_url" --tag "$tag" --admin-url "http://127.0.0.1:$admin_port" \
    --classifier-url "http://127.0.0.1:$ai_port" "$@" || true
  ((with_nats)) || return 0
  local relayed completed
  relayed=$("$nats_stream" count --server "$nats_url" --stream OUTBOX 2>/dev/null || echo "?")
  # Relayed: completed, or consumed by nats-relay while another handler still retries.
  completed=$(psql "$database_url" -Atq -c "SELECT count(*) FROM event_publication e WHERE event_type = 'MissionCompleted'
    AND (status = 'COMPLETED' OR EXISTS (SELECT 1 FROM event_consumption c WHERE c.event_id = e.event_id
                                          AND c.handler_name = 'nats-relay')) AND $this_run" 2>/dev/null || echo "?")
  if [[ "${1:-}" == --final ]]; then
    if [[ "$relayed" == "$completed" ]]; then
      echo "nats: stream OUTBOX holds $relayed messages for $completed relayed MissionCompleted events: each exactly once"
    else
      echo "nats: MISMATCH: stream OUTBOX holds $relayed messages for $completed relayed MissionCompleted events"
      nats_mismatch=1
    fi
  else
    echo "  nats: $relayed MissionCompleted messages in stream OUTBOX ($completed events relayed)"
  fi
}
nats_mismatch=0
hosts_alive() {
  local pid
  for pid in "${host_pids[@]}"; do
    kill -0 "$pid" 2>/dev/null || { echo "demo: an outboxd host exited unexpectedly; see $work/outboxd-*.log" >&2; return 1; }
  done
}

started=$SECONDS
next_report=$((SECONDS + 5))
while ((!stop_requested)); do
  sleep 1 || true
  ((duration > 0 && SECONDS - started >= duration)) && break
  hosts_alive || break
  if ((SECONDS >= next_report)); then
    printf '[%4ds]\n' $((SECONDS - started))
    report
    next_report=$((SECONDS + 5))
  fi
done

# --- stop: application first, then let the hosts finish what was published ------------------
log "stopping the application; the hosts finish what was published (Ctrl-C again to skip)"
stop_processes 10 "${app_pids[@]}"
tail -q -n 1 "$work/register-websites.log" "$work/complete-missions.log" | sed 's/^/  /'

unfinished() {
  psql "$database_url" -Atq -c "SELECT count(*) FROM event_publication WHERE status IN ('PENDING', 'RETRY_WAIT', 'PROCESSING')
    AND $this_run" 2>/dev/null || echo "?"
}
drain_started=$SECONDS
while ((!fast_stop && SECONDS - drain_started < 90)); do
  left=$(unfinished)
  [[ "$left" == 0 ]] && break
  hosts_alive || break
  printf '  %s events still to deliver\n' "$left"
  sleep 3 || true
done

log "stopping the outboxd hosts"
stop_processes 30 "${host_pids[@]}"

echo
echo "=== summary after $((SECONDS - started))s (run tag $tag) ==="
report --final
echo "logs: $work (outboxd-1.log, outboxd-2.log, ai-classifier.log, admin-stats-server.log, ...)"
((nats_mismatch == 0)) || exit 1
