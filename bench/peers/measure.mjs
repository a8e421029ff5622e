// Shared by the peer drivers: clocks, /proc sampling and result lines in the format
// bench/run.sh records ("name=value" pairs on one line).
import { readFileSync, readdirSync } from 'node:fs';

/** Wall-clock milliseconds with microsecond resolution. */
export const nowMs = () => performance.timeOrigin + performance.now();

export function parseArgs(argv) {
  const args = { _: [] };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i].startsWith('--')) args[argv[i].slice(2)] = argv[++i];
    else args._.push(argv[i]);
  }
  return args;
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// utime + stime of a process in seconds (Linux reports them in USER_HZ = 100 ticks/s); with
// reapedChildren, also what its children that already exited used (cutime + cstime).
function cpuSeconds(pid, reapedChildren = false) {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ').map(Number);
    const own = fields[11] + fields[12];
    return (reapedChildren ? own + fields[13] + fields[14] : own) / 100;
  } catch {
    return 0;
  }
}

function parentOf(pid) {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(text.slice(text.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return -1;
  }
}

/** CPU seconds of the postmaster and every process it started, exited ones included. */
export function clusterCpuSeconds(postmaster) {
  if (!postmaster) return 0;
  let total = cpuSeconds(postmaster, true);
  for (const name of readdirSync('/proc')) {
    if (/^\d+$/.test(name) && parentOf(Number(name)) === postmaster) total += cpuSeconds(Number(name));
  }
  return total;
}

export function selfCpuSeconds() {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1e6;
}

export function peakRssKiB() {
  const match = /VmHWM:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'));
  return match ? Number(match[1]) : 0;
}

/**
 * Nearest-rank percentiles, in milliseconds, of handler start minus publish (taken just
 * before the publishing statement was sent) and minus commit (when that statement
 * returned), over the events after the first `skip` (the warm-up). `events` is indexed by
 * publication order: { published, committed, started }.
 */
export function latencyLine(events, skip) {
  const measured = events.slice(skip);
  const missing = measured.filter((e) => e.started === undefined).length;
  if (missing > 0) throw new Error(`${missing} published jobs never started`);
  const percentiles = (values) => {
    const sorted = values.sort((a, b) => a - b);
    const at = (p) => sorted[Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length))) - 1];
    return [at(50), at(95), at(99), sorted[sorted.length - 1]].map((v) => v.toFixed(2));
  };
  const [p50, p95, p99, max] = percentiles(measured.map((e) => e.started - e.published));
  const [c50, c95, c99] = percentiles(measured.map((e) => e.started - e.committed));
  return `n=${measured.length} p50_ms=${p50} p95_ms=${p95} p99_ms=${p99} max_ms=${max} ` +
    `c50_ms=${c50} c95_ms=${c95} c99_ms=${c99}`;
}

/**
 * Runs one throughput measurement: load() makes `n` jobs visible in one commit, then
 * drained() is polled until the queue has processed them all. The clock runs from the
 * load's commit to the first poll that finds the queue empty; polling starts only once the
 * handler saw all n jobs, so it does not load the database while jobs are being worked.
 */
export async function measureThroughput({ n, postmaster, load, handled, drained, query, timeoutMs = 900_000 }) {
  await load();
  const start = nowMs();
  const cpuBefore = { self: selfCpuSeconds(), pg: clusterCpuSeconds(postmaster) };
  const lsnBefore = (await query('SELECT pg_current_wal_lsn()::text AS lsn')).rows[0].lsn;
  const deadline = start + timeoutMs;
  while (handled() < n) {
    if (nowMs() > deadline) throw new Error(`timed out: ${handled()} of ${n} jobs handled`);
    await sleep(5);
  }
  while (!(await drained())) {
    if (nowMs() > deadline) throw new Error('timed out waiting for the queue to record completions');
    await sleep(5);
  }
  const seconds = (nowMs() - start) / 1000;
  const cpuHost = selfCpuSeconds() - cpuBefore.self;
  const cpuPg = clusterCpuSeconds(postmaster) - cpuBefore.pg;
  const wal = (await query(`SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '${lsnBefore}')::bigint AS wal`)).rows[0].wal;
  return `n=${n} seconds=${seconds.toFixed(3)} eps=${Math.round(n / seconds)} cpu_host_s=${cpuHost.toFixed(2)} ` +
    `cpu_pg_s=${cpuPg.toFixed(2)} rss_kib=${peakRssKiB()} wal_b=${wal}`;
}

/**
 * Publishes `rate` jobs a second for `seconds` on a fixed schedule (a late publish does not
 * shift the ones after it), waits for their handlers and returns the latency line.
 * publish(seq, published) sends one job carrying { seq, t: published } and resolves once its
 * statement committed; the handler puts nowMs() into starts under the job's seq.
 */
export async function measureLatency({ rate, seconds, skip, publish, starts }) {
  const total = Math.round(rate * seconds);
  const events = [];
  const begin = nowMs();
  for (let seq = 0; seq < total; seq++) {
    const wait = begin + (seq * 1000) / rate - nowMs();
    if (wait > 0) await sleep(wait);
    const published = nowMs();
    await publish(seq, published);
    events.push({ published, committed: nowMs() });
  }
  for (let waited = 0; starts.size < total && waited < 10_000; waited += 10) await sleep(10);
  events.forEach((event, seq) => { event.started = starts.get(seq); });
  return latencyLine(events, skip);
}
