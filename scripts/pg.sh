#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for tests.
#
#   scripts/pg.sh free-port        prints a TCP port nothing listens on at 127.0.0.1
#   scripts/pg.sh start DIR PORT   creates a cluster in DIR (trust auth, user postgres,
#                                  UTF8), listening only on 127.0.0.1:PORT with its unix
#                                  socket inside DIR; prints postgresql://postgres@127.0.0.1:PORT/postgres
#   scripts/pg.sh start DIR PORT --non-durable
#                                  the same without fsync and full-page writes (PostgreSQL's
#                                  "non-durable settings"): for the shared cluster of the test
#                                  stages, whose every test creates and drops a database (a
#                                  DROP DATABASE waits for a checkpoint's fsyncs: about 1-2 s
#                                  against 0.02 s without). A killed server loses nothing
#                                  this way; only an operating-system crash would.
#   scripts/pg.sh stop DIR         stops that cluster and removes DIR
#
# PostgreSQL refuses to run as root: as root the server runs as the postgres user (DIR is
# handed to it); any other user runs it directly and must own DIR. PG_BIN overrides the
# directory of the server binaries.
set -euo pipefail

marker=.outbox-throwaway-cluster

usage() {
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}" >&2
  exit 2
}

pg_bin() {
  if [[ -n "${PG_BIN:-}" ]]; then
    echo "$PG_BIN"
  elif [[ -x /usr/lib/postgresql/15/bin/initdb ]]; then
    echo /usr/lib/postgresql/15/bin
  else
    # Any other installed major, newest first.
    local dir
    dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
    [[ -n "$dir" ]] || { echo "pg.sh: no PostgreSQL server binaries found (install postgresql-15)" >&2; exit 1; }
    echo "$dir"
  fi
}

# Runs a command as the cluster's owner.
as_owner() {
  if ((EUID == 0)); then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

port_in_use() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

free_port() {
  local port attempt
  for attempt in $(seq 1 100); do
    # Below Linux's ephemeral range (32768-60999), where outgoing connections could take
    # the port between this check and the bind.
    port=$((10000 + RANDOM % 22000))
    if ! port_in_use "$port"; then
      echo "$port"
      return 0
    fi
  done
  echo "pg.sh: no free port found" >&2
  exit 1
}

start() {
  local dir=$1 port=$2 durability=${3:-} bin
  [[ -z "$durability" || "$durability" == --non-durable ]] || usage
  [[ "$port" =~ ^[0-9]+$ ]] || { echo "pg.sh: PORT must be a number, got '$port'" >&2; exit 2; }
  bin=$(pg_bin)
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  if [[ -n "$(ls -A "$dir")" ]]; then
    echo "pg.sh: $dir is not empty" >&2
    exit 1
  fi
  touch "$dir/$marker"
  if ((EUID == 0)); then
    chown postgres:postgres "$dir" "$dir/$marker"
    if ! runuser -u postgres -- test -w "$dir"; then
      echo "pg.sh: the postgres user cannot reach $dir; use a directory under /tmp" >&2
      exit 1
    fi
  elif [[ ! -O "$dir" ]]; then
    echo "pg.sh: $dir must be owned by $(id -un)" >&2
    exit 1
  fi

  if ! as_owner "$bin/initdb" -D "$dir/data" -A trust -U postgres -E UTF8 --locale=C >"$dir/initdb.log" 2>&1; then
    cat "$dir/initdb.log" >&2
    exit 1
  fi
  as_owner tee -a "$dir/data/postgresql.conf" >/dev/null <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
# The test tiers share this server side by side (the fault tier's hosts beside the
# sample plugins' and the integration tier's): 100 connections ran out once.
max_connections = 300
CONF
  if [[ "$durability" == --non-durable ]]; then
    printf 'fsync = off\nfull_page_writes = off\n' | as_owner tee -a "$dir/data/postgresql.conf" >/dev/null
  fi
  if ! as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 60 start >/dev/null; then
    echo "pg.sh: PostgreSQL did not start; its log:" >&2
    cat "$dir/log" >&2 || true
    exit 1
  fi
  echo "postgresql://postgres@127.0.0.1:$port/postgres"
}

stop() {
  local dir=$1 bin
  [[ -d "$dir" ]] || return 0
  if [[ ! -e "$dir/$marker" ]]; then
    echo "pg.sh: $dir was not created by 'pg.sh start'; not touching it" >&2
    exit 1
  fi
  bin=$(pg_bin)
  if [[ -f "$dir/data/postmaster.pid" ]]; then
    as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null ||
      as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null ||
      echo "pg.sh: could not stop the server in $dir; see $dir/log" >&2
  fi
  rm -rf "$dir"
}

case "${1:-}" in
  free-port) (($# == 1)) || usage; free_port ;;
  start) (($# == 3 || $# == 4)) || usage; start "$2" "$3" "${4:-}" ;;
  stop) (($# == 2)) || usage; stop "$2" ;;
  *) usage ;;
esac
