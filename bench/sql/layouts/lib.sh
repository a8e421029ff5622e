# Sourced by bench/sql/layouts/run.sh (and usable by hand): measures what a window of work
# costs one throwaway PostgreSQL 15 cluster started with pg_stat_statements preloaded.
# Needs $url_base (postgresql://postgres@127.0.0.1:PORT), $pg_data (the cluster's data
# directory) and $postmaster (its pid).
pg_bin=${PG_BIN:-/usr/lib/postgresql/15/bin}

q() { PGOPTIONS='-c client_min_messages=warning' psql -X -q -At -v ON_ERROR_STOP=1 -d "$url_base/$1" -c "$2"; }

# CPU seconds of the postmaster and all its processes, exited ones included (cutime).
cluster_cpu() {
  local total pid
  total=$(awk '{ print $14 + $15 + $16 + $17 }' "/proc/$postmaster/stat")
  for pid in $(pgrep -P "$postmaster"); do
    total=$((total + $(awk '{ print $14 + $15 }' "/proc/$pid/stat" 2>/dev/null || echo 0)))
  done
  echo "$total"
}

# measure_begin DB: statement statistics reset, LSN and CPU remembered. No checkpoint: the
# caller checkpoints once before a whole lifecycle (publish, process, retention), so pages
# are imaged once per lifecycle as in bench/run.sh (the cluster's checkpoint_timeout and
# max_wal_size are raised so no checkpoint falls inside it).
measure_begin() {
  q "$1" "SELECT pg_stat_statements_reset()" >/dev/null
  m_lsn0=$(q "$1" "SELECT pg_current_wal_lsn()")
  m_cpu0=$(cluster_cpu)
}

# measure_end DB LABEL N: prints, per event, PostgreSQL CPU (from /proc), WAL bytes, the WAL
# by record type and by relation (pg_waldump), and every statement's share
# (pg_stat_statements: calls, rows, execution + planning time, WAL bytes and records).
measure_end() {
  local db=$1 label=$2 n=$3 lsn1 cpu1 wal cpu_us wal_ev idx stmts
  lsn1=$(q "$db" "SELECT pg_current_wal_lsn()")
  cpu1=$(cluster_cpu)
  wal=$(q "$db" "SELECT pg_wal_lsn_diff('$lsn1', '$m_lsn0')::bigint")
  cpu_us=$(printf '%.1f' "$(bc -l <<<"($cpu1 - $m_cpu0) * 10000 / $n")")
  wal_ev=$(printf '%.0f' "$(bc -l <<<"$wal / $n")")
  q "$db" "SELECT relfilenode || ' ' || relname FROM pg_class WHERE relfilenode <> 0" >"$m_tmp.rels"
  "$pg_bin/pg_waldump" -p "$pg_data/pg_wal" -s "$m_lsn0" -e "$lsn1" 2>/dev/null |
    awk -v n="$n" -v rels="$m_tmp.rels" '
      BEGIN { while ((getline line < rels) > 0) { split(line, a, " "); name[a[1]] = a[2] } }
      {
        rm = $2; len = $6; sub(/,/, "", len)
        d = $0; sub(/.*desc: /, "", d); split(d, w, " "); kind = w[1]
        rel = "-"
        if (match($0, /blkref #0: rel [0-9]+\/[0-9]+\/[0-9]+/)) {
          r = substr($0, RSTART, RLENGTH); sub(/.*\//, "", r); rel = (r in name) ? name[r] : "rel" r
        }
        sub(/_p[0-9]+$/, "_p*", rel)
        if (rm == "Heap" || rm == "Heap2" || rm == "Btree") key = rm " " kind " " rel; else key = rm " " kind
        bytes[key] += len; count[key]++
        fpi = gsub(/FPW/, "FPW"); fpis[key] += fpi; allfpi += fpi
        if (rm == "Btree" && (kind == "INSERT_LEAF" || kind == "INSERT_POST")) idx++
      }
      END {
        for (k in bytes) if (bytes[k] / n >= 0.5) printf "  wal %8.1f B/ev %6.3f rec/ev fpi=%-6d %s\n", bytes[k] / n, count[k] / n, fpis[k], k
        printf "  idx %.2f btree leaf inserts/ev, %d full-page images\n", idx / n, allfpi
      }' | sort -k2 -nr >"$m_tmp.wal"
  idx=$(awk '$1 == "idx" { print $2 }' "$m_tmp.wal")
  stmts=$(q "$db" "SELECT round(coalesce(sum(calls), 0)::numeric / $n, 3) FROM pg_stat_statements
                   WHERE toplevel AND query NOT LIKE '%pg_stat_statements%' AND query NOT LIKE '%relfilenode%'
                     AND query NOT LIKE 'SELECT EXISTS%' AND query NOT LIKE '%pg_current_wal_lsn%'")
  printf '== %s: n=%d cpu_pg_us_per_event=%s wal_b_per_event=%s btree_inserts_per_event=%s statements_per_event=%s\n' \
    "$label" "$n" "$cpu_us" "$wal_ev" "$idx" "$stmts"
  [[ -n "${summary:-}" ]] && printf '%s\t%s\t%s\t%s\t%s\n' "$label" "$cpu_us" "$wal_ev" "$idx" "$stmts" >>"$summary"
  cat "$m_tmp.wal"
  q "$db" "SELECT format('  stmt%s calls=%s rows/call=%s time_us/ev=%s wal_b/ev=%s walrec/ev=%s fpi=%s | %s',
                        CASE WHEN toplevel THEN '' ELSE '(nested)' END, calls, round(rows::numeric / greatest(calls, 1), 1),
                        round(((total_exec_time + total_plan_time) * 1000 / $n)::numeric, 2),
                        round(wal_bytes / $n, 1), round(wal_records::numeric / $n, 3), wal_fpi,
                        left(regexp_replace(query, '\\s+', ' ', 'g'), 100))
           FROM pg_stat_statements
           WHERE query NOT LIKE '%pg_stat_statements%' AND calls > 0
             AND (total_exec_time + total_plan_time) * 1000 / $n >= 0.05
           ORDER BY total_exec_time + total_plan_time DESC LIMIT 16"
}
m_tmp=$(mktemp /tmp/layouts-measure.XXXXXX)
