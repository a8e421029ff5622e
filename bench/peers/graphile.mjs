// graphile-worker driver for bench/run.sh, through its library API with no-op tasks.
//   node graphile.mjs throughput --url URL --n N --concurrency C [--max-pool-size M] [--local-queue S --complete-batch-delay D] [--postmaster P]
//   node graphile.mjs latency --url URL --rate R --seconds S --skip K [--concurrency C]
//   node graphile.mjs load --url URL --n N        (queues N jobs; no worker runs)
//   node graphile.mjs work --url URL --concurrency C [...]   (works until SIGTERM)
// Prints one result line. Run with NO_LOG_SUCCESS=1 (graphile-worker otherwise logs a line
// per job; outboxd does not either).
import { run, runMigrations } from 'graphile-worker';
import pg from 'pg';
import { measureLatency, measureThroughput, nowMs, parseArgs, peakRssKiB } from './measure.mjs';

const args = parseArgs(process.argv.slice(2));
const mode = args._[0];
const url = args.url;

// add_jobs inserts every job in one statement and notifies the workers on commit.
const addJobs = (client, n) => client.query(
  `SELECT count(*) FROM graphile_worker.add_jobs(ARRAY(
     SELECT ROW('bench_noop', json_build_object('n', i), NULL, NULL, NULL, NULL, NULL, NULL)::graphile_worker.job_spec
     FROM generate_series(1, $1::int) AS i))`, [n]);

if (mode === 'load') {
  await runMigrations({ connectionString: url });
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await addJobs(client, Number(args.n));
  await client.end();
  process.exit(0);
}
let handled = 0;
const starts = new Map();

const worker = {};
if (args['local-queue']) worker.localQueue = { size: Number(args['local-queue']) };
if (args['complete-batch-delay']) worker.completeJobBatchDelay = Number(args['complete-batch-delay']);

// The pool: graphile-worker's documentation (Configuration, worker.maxPoolSize) advises
// "10 or concurrentJobs + 2, whichever is larger"; its default is 10 whatever the
// concurrency. --max-pool-size overrides it.
const concurrency = Number(args.concurrency ?? 10);
const maxPoolSize = Number(args['max-pool-size'] ?? Math.max(10, concurrency + 2));

const runner = await run({
  connectionString: url,
  concurrency,
  maxPoolSize,
  noHandleSignals: true,
  preset: { worker },
  taskList: {
    bench_noop: async () => {
      handled++;
    },
    bench_latency: async (payload) => {
      starts.set(payload.seq, nowMs());
    },
  },
});

if (mode === 'work') {
  await new Promise((resolve) => process.once('SIGTERM', resolve));
  await runner.stop();
  process.exit(0);
}

const client = new pg.Client({ connectionString: url });
await client.connect();

if (mode === 'throughput') {
  const n = Number(args.n);
  const line = await measureThroughput({
    n,
    postmaster: Number(args.postmaster ?? 0),
    load: () => addJobs(client, n),
    query: (text) => client.query(text),
    handled: () => handled,
    // Completed jobs are deleted.
    drained: async () => (await client.query('SELECT NOT EXISTS (SELECT 1 FROM graphile_worker._private_jobs) AS done'))
      .rows[0].done,
  });
  console.log(line);
} else if (mode === 'latency') {
  const line = await measureLatency({
    rate: Number(args.rate),
    seconds: Number(args.seconds),
    skip: Number(args.skip ?? 0),
    // One autocommit statement (graphile_worker.add_job) per job.
    publish: (seq, published) => runner.addJob('bench_latency', { seq, t: published }),
    starts,
  });
  console.log(`${line} rss_kib=${peakRssKiB()}`);
} else {
  throw new Error(`unknown mode ${mode}`);
}

await client.end();
await runner.stop();
