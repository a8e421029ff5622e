// pg-boss driver for bench/run.sh: `workers` work() loops with a no-op batch handler.
//   node pgboss.mjs throughput --url URL --n N --workers W --batch-size B --poll S [--max M] [--postmaster P]
//   node pgboss.mjs latency --url URL --rate R --seconds S --skip K --workers W --batch-size B --poll S
//   node pgboss.mjs load --url URL --n N          (queues N jobs; no worker runs)
//   node pgboss.mjs work --url URL --workers W --batch-size B --poll S   (works until SIGTERM)
// Prints one result line.
import PgBoss from 'pg-boss';
import { measureLatency, measureThroughput, nowMs, parseArgs, peakRssKiB } from './measure.mjs';

const args = parseArgs(process.argv.slice(2));
const mode = args._[0];
const queue = mode === 'latency' ? 'bench_latency' : 'bench_noop';
const workers = Number(args.workers ?? 1);
const work = { batchSize: Number(args['batch-size'] ?? 1), pollingIntervalSeconds: Number(args.poll ?? 2) };

// The pool (constructor option `max`, default 10, "shared by all operations in this
// instance"): each work() loop holds one connection while it fetches or completes a batch,
// and pg-boss's own maintenance and monitoring need theirs, so W loops get W + 2 unless
// --max says otherwise.
const max = Number(args.max ?? workers + 2);
const boss = new PgBoss({ connectionString: args.url, max });
boss.on('error', (error) => console.error(`pg-boss error: ${error.message}`));
await boss.start();
await boss.createQueue(queue);

const insertJobs = (n) => boss.insert(Array.from({ length: n }, (_, i) => ({ name: queue, data: { n: i } })));
if (mode === 'load') {
  await insertJobs(Number(args.n));
  await boss.stop({ graceful: false, wait: true });
  process.exit(0);
}

let handled = 0;
const starts = new Map();
for (let i = 0; i < workers; i++) {
  await boss.work(queue, work, async (jobs) => {
    const started = nowMs();
    if (mode === 'latency') for (const job of jobs) starts.set(job.data.seq, started);
    handled += jobs.length;
  });
}

if (mode === 'work') {
  await new Promise((resolve) => process.once('SIGTERM', resolve));
  await boss.stop({ graceful: false, wait: false });
  process.exit(0);
}

if (mode === 'throughput') {
  const n = Number(args.n);
  const line = await measureThroughput({
    n,
    postmaster: Number(args.postmaster ?? 0),
    // insert() adds every job in one statement.
    load: () => insertJobs(n),
    query: async (text) => boss.getDb().executeSql(text),
    handled: () => handled,
    // Completed jobs stay in the queue's table (state 'completed') until archived.
    drained: async () => (await boss.getDb().executeSql(
      `SELECT NOT EXISTS (SELECT 1 FROM pgboss.job WHERE name = $1 AND state < 'completed') AS done`, [queue]))
      .rows[0].done,
  });
  console.log(line);
} else if (mode === 'latency') {
  const line = await measureLatency({
    rate: Number(args.rate),
    seconds: Number(args.seconds),
    skip: Number(args.skip ?? 0),
    // One autocommit INSERT per job.
    publish: (seq, published) => boss.send(queue, { seq, t: published }),
    starts,
  });
  console.log(`${line} rss_kib=${peakRssKiB()}`);
} else {
  throw new Error(`unknown mode ${mode}`);
}

await boss.stop({ graceful: false, wait: false });
process.exit(0);
