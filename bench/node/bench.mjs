// The Node.js BullMQ half of Bullpen's throughput benchmark.
//
// bench/throughput.py drives it, so that Bullpen and BullMQ are measured by
// the same code (timings of processing and pickup latency are read back from
// Redis by the Python side). Each subcommand prints one JSON line on stdout.
//
//   node bench.mjs version
//   node bench.mjs add        --url URL --queue Q --jobs N
//       Queue.addBulk of N no-op jobs; prints {seconds} around addBulk only.
//   node bench.mjs worker     --url URL --queue Q --concurrency C [--processor noop|stamp]
//       One Worker in this process. Line protocol on stdin/stdout:
//       prints {ready: true} once connected, starts on a GO line, and on a STOP line
//       prints {cpu_us, user_us, sys_us} (process.cpuUsage() between GO and
//       STOP), then closes and exits. No event listeners are attached, so
//       the worker does only what BullMQ itself does per job.
//   node bench.mjs single-add --url URL --queue Q --jobs N
//       Queue.add of N no-op jobs, one after another (each awaited before the
//       next, as a web request adds); prints {seconds} around the adds only.
//   node bench.mjs concurrent-add --url URL --queue Q --jobs N --concurrency C
//       [--auto-pipelining 1]
//       C async loops, each awaiting Queue.add of its share of N jobs, on one
//       Queue whose ioredis connection has enableAutoPipelining when asked
//       (concurrent adds of one tick go out as one pipeline); prints {seconds}.
//   node bench.mjs pickup-add --url URL --queue Q --jobs N --interval-ms MS
//       Queue.add of N jobs, one at a time, MS apart; each job's data.t is the
//       wall-clock time (ms, sub-ms precision) just before its add call.
//
// The `stamp` processor returns the wall-clock time (ms) at which it started,
// which BullMQ stores as the job's returnvalue.

import { createInterface } from "node:readline";
import { performance } from "node:perf_hooks";
import { createRequire } from "node:module";
import { Queue, Worker } from "bullmq";

const require = createRequire(import.meta.url);

function parseArgs(argv) {
  const out = { _: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a.startsWith("--")) {
      out[a.slice(2)] = argv[i + 1];
      i++;
    } else {
      out._.push(a);
    }
  }
  return out;
}

function connectionOf(url, extra = {}) {
  const u = new URL(url);
  const db = Number((u.pathname || "/0").slice(1) || 0);
  return { host: u.hostname, port: Number(u.port || 6379), db, ...extra };
}

// Wall-clock ms with sub-ms precision. performance.timeOrigin can be a few
// tenths of a ms off the system clock (and differently in each process), so
// the offset is calibrated against Date.now() at the instant it ticks over.
function clockOffset() {
  const offsets = [];
  for (let k = 0; k < 5; k++) {
    const start = Date.now();
    let hr;
    let wall;
    do {
      hr = performance.now();
      wall = Date.now();
    } while (wall === start);
    offsets.push(wall - hr);
  }
  offsets.sort((a, b) => a - b);
  return offsets[2];
}
const OFFSET = clockOffset();
const nowMs = () => OFFSET + performance.now();
const emit = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");
const sleep = (ms) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

async function cmdVersion() {
  emit({
    bullmq: require("bullmq/package.json").version,
    ioredis: require("ioredis/package.json").version,
    node: process.version,
  });
}

async function cmdAdd(args) {
  const n = Number(args.jobs);
  const queue = new Queue(args.queue, { connection: connectionOf(args.url) });
  await queue.waitUntilReady();
  const jobs = [];
  for (let i = 0; i < n; i++) jobs.push({ name: "noop", data: {} });
  const t0 = performance.now();
  const added = await queue.addBulk(jobs);
  const seconds = (performance.now() - t0) / 1000;
  await queue.close();
  emit({ seconds, added: added.length });
}

// A few adds first, so that the script is loaded and the connection is warm.
const WARM_ADDS = 50;

async function cmdSingleAdd(args) {
  const n = Number(args.jobs);
  const queue = new Queue(args.queue, { connection: connectionOf(args.url) });
  await queue.waitUntilReady();
  for (let i = 0; i < WARM_ADDS; i++) await queue.add("warm", {});
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await queue.add("noop", {});
  const seconds = (performance.now() - t0) / 1000;
  await queue.close();
  emit({ seconds, added: n });
}

async function cmdConcurrentAdd(args) {
  const n = Number(args.jobs);
  const c = Number(args.concurrency || 50);
  const auto = args["auto-pipelining"] === "1";
  const queue = new Queue(args.queue, {
    connection: connectionOf(args.url, { enableAutoPipelining: auto }),
  });
  await queue.waitUntilReady();
  for (let i = 0; i < WARM_ADDS; i++) await queue.add("warm", {});
  let added = 0;
  const loop = async (share) => {
    for (let i = 0; i < share; i++) {
      await queue.add("noop", {});
      added++;
    }
  };
  const shares = [];
  for (let k = 0; k < c; k++) shares.push(Math.floor(n / c) + (k < n % c ? 1 : 0));
  const t0 = performance.now();
  await Promise.all(shares.map(loop));
  const seconds = (performance.now() - t0) / 1000;
  await queue.close();
  emit({ seconds, added });
}

async function cmdPickupAdd(args) {
  const n = Number(args.jobs);
  const interval = Number(args["interval-ms"]);
  const queue = new Queue(args.queue, { connection: connectionOf(args.url) });
  await queue.waitUntilReady();
  const start = performance.now();
  for (let i = 0; i < n; i++) {
    await sleep(start + i * interval - performance.now());
    await queue.add("pickup", { t: nowMs() });
  }
  await queue.close();
  emit({ added: n });
}

async function cmdWorker(args) {
  const concurrency = Number(args.concurrency || 1);
  const processor =
    args.processor === "stamp" ? async () => nowMs() : async () => undefined;
  const worker = new Worker(args.queue, processor, {
    connection: connectionOf(args.url),
    concurrency,
    autorun: false,
  });
  worker.on("error", (err) => process.stderr.write(`worker error: ${err}\n`));
  await worker.waitUntilReady();

  const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
  const nextLine = async () => {
    const r = await lines.next();
    return r.done ? "STOP" : r.value.trim();
  };

  emit({ ready: true });
  while ((await nextLine()) !== "GO");
  const cpu0 = process.cpuUsage();
  const running = worker.run();
  while ((await nextLine()) !== "STOP");
  const cpu = process.cpuUsage(cpu0);
  emit({ cpu_us: cpu.user + cpu.system, user_us: cpu.user, sys_us: cpu.system });
  await worker.close();
  await running.catch(() => undefined);
  process.exit(0);
}

const args = parseArgs(process.argv.slice(2));
const commands = {
  version: cmdVersion,
  add: cmdAdd,
  worker: cmdWorker,
  "pickup-add": cmdPickupAdd,
  "single-add": cmdSingleAdd,
  "concurrent-add": cmdConcurrentAdd,
};
const cmd = commands[args._[0]];
if (!cmd) {
  process.stderr.write(`usage: node bench.mjs {${Object.keys(commands).join("|")}} ...\n`);
  process.exit(2);
}
cmd(args).catch((err) => {
  process.stderr.write(`${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
