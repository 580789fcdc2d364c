// Node.js side of the interop tests: real BullMQ driven from pytest.
//
//   node bull.mjs <redis> call <queue> <method> [argsJson] [queueOptsJson]
//                                                           Queue method, result as JSON
//   node bull.mjs <redis> read <queue> <idsJson>             Job.fromId for each id
//   node bull.mjs <redis> flow <flowJson>                    FlowProducer.add
//   node bull.mjs <redis> worker <queue> <optsJson>          a worker, JSON lines out
//   node bull.mjs <redis> events <queue>                     QueueEvents, JSON lines out
//   node bull.mjs <redis> watch <queue> <everyMs>            the active jobs, then
//                                                           getJobCounts(), a JSON line each time
//   node bull.mjs <redis> raw <commandsJson>                 plain ioredis commands
//   node bull.mjs <redis> cron <casesJson>                   BullMQ's next run of
//                                                           [pattern, afterMs, tz] cases
//
// <redis> is a port on 127.0.0.1 or a redis+cluster:// URL (see connection.mjs).
// A JSON argument may be given as @path to a file holding it.
// Long-running modes print {"ready":true} once connected and stop on SIGTERM.
// Job behaviour comes from its data (see tests/interop/behaviour.py):
// hangMs (first start only), sleepMs, progress [..], failFirst, fail "<message>", parent (return the
// children's values), n (returned doubled).
import { readFileSync } from 'node:fs';
import { FlowProducer, Job, Queue, QueueEvents, Worker, getNextMillis } from 'bullmq';
import { connect } from './connection.mjs';

const [target, mode, ...rest] = process.argv.slice(2);
const { connection, newClient } = connect(target);
const out = value => process.stdout.write(JSON.stringify(value) + '\n');
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));
const json = (text, fallback) => text === undefined ? fallback
  : JSON.parse(text.startsWith('@') ? readFileSync(text.slice(1), 'utf8') : text);

function jobView(job) {
  if (!job) return null;
  return {
    id: job.id, name: job.name, data: job.data, opts: job.opts,
    priority: job.priority, delay: job.delay, timestamp: job.timestamp,
    attemptsMade: job.attemptsMade, attemptsStarted: job.attemptsStarted,
    stalledCounter: job.stalledCounter, returnvalue: job.returnvalue,
    failedReason: job.failedReason, processedOn: job.processedOn,
    finishedOn: job.finishedOn, processedBy: job.processedBy ?? null,
    parentKey: job.parentKey ?? null, parent: job.parent ?? null,
    repeatJobKey: job.repeatJobKey ?? null, progress: job.progress,
    queueName: job.queueName,
  };
}

function toJSON(value) {
  if (value instanceof Job) return jobView(value);
  if (Array.isArray(value)) return value.map(toJSON);
  if (value && typeof value === 'object' && value.job instanceof Job) {
    return { job: jobView(value.job), children: (value.children || []).map(toJSON) };
  }
  return value === undefined ? null : value;
}

async function call(queueName, method, args, queueOpts) {
  const queue = new Queue(queueName, { ...queueOpts, connection });
  try {
    out(toJSON(await queue[method](...args)));
  } finally {
    await queue.close();
  }
}

async function read(queueName, ids) {
  const queue = new Queue(queueName, { connection });
  const jobs = [];
  for (const id of ids) {
    try {
      jobs.push(jobView(await Job.fromId(queue, id)));
    } catch (err) {
      jobs.push({ id, error: String(err) });
    }
  }
  out(jobs);
  await queue.close();
}

async function flow(tree) {
  const producer = new FlowProducer({ connection });
  out(toJSON(await producer.add(tree)));
  await producer.close();
}

async function behave(job, name) {
  const data = job.data && typeof job.data === 'object' ? job.data : {};
  if (data.hangMs && job.attemptsStarted <= 1) await sleep(data.hangMs);
  if (data.sleepMs) await sleep(data.sleepMs);
  for (const p of data.progress || []) await job.updateProgress(p);
  if (data.failFirst && job.attemptsMade === 0) throw new Error('first attempt fails');
  if (data.fail) throw new Error(data.fail);
  if (data.parent) return await job.getChildrenValues();
  return { id: job.id, by: name, double: (data.n || 0) * 2 };
}

async function worker(queueName, opts) {
  const name = opts.name || 'node';
  const worker = new Worker(queueName, async job => {
    out({ start: job.id, attemptsMade: job.attemptsMade, priority: job.priority,
          at: Date.now() });
    const data = job.data && typeof job.data === 'object' ? job.data : {};
    if (data.rateLimitMs && job.attemptsStarted <= 1) {
      // The manual rate limit (behaviour.py's twin): limit, then give back.
      await worker.rateLimit(data.rateLimitMs);
      throw Worker.RateLimitError();
    }
    return behave(job, name);
  }, { connection, ...opts });
  worker.on('completed', job => out({ done: job.id, by: name }));
  worker.on('failed', (job, err) => out({ failed: job && job.id, reason: err.message }));
  worker.on('error', err => out({ error: String(err) }));
  await worker.waitUntilReady();
  out({ ready: true });
  await new Promise(resolve => process.once('SIGTERM', resolve));
  await worker.close();
  out({ closed: true });
}

const EVENTS = ['active', 'added', 'progress', 'completed', 'failed', 'retries-exhausted',
  'stalled', 'delayed', 'waiting', 'waiting-children', 'removed', 'drained', 'paused',
  'resumed', 'duplicated', 'deduplicated', 'cleaned'];

async function events(queueName) {
  const queueEvents = new QueueEvents(queueName, { connection, lastEventId: '0-0' });
  for (const event of EVENTS) {
    queueEvents.on(event, (args, id) => out({ event, args: args ?? null, id: id ?? null }));
  }
  await queueEvents.waitUntilReady();
  out({ ready: true });
  await new Promise(resolve => process.once('SIGTERM', resolve));
  await queueEvents.close();
  out({ closed: true });
}

async function watch(queueName, everyMs) {
  const queue = new Queue(queueName, { connection });
  await queue.waitUntilReady();
  let stopped = false;
  process.once('SIGTERM', () => { stopped = true; });
  out({ ready: true });
  while (!stopped) {
    // The active jobs first, then the counts: a job listed active that is
    // still running is counted active too (jobs only move forward).
    const active = (await queue.getJobs(['active'])).map(job => job && {
      id: job.id, name: job.name, processedOn: job.processedOn ?? null,
      processedBy: job.processedBy ?? null });
    const counts = await queue.getJobCounts();
    out({ counts, active, at: Date.now() });
    await sleep(everyMs);
  }
  await queue.close();
  out({ closed: true });
}

async function raw(commands) {
  const client = newClient();
  const replies = [];
  for (const [name, ...args] of commands) replies.push(await client.call(name, ...args));
  out(replies);
  client.disconnect();
}

const modes = {
  call: () => call(rest[0], rest[1], json(rest[2], []), json(rest[3], {})),
  read: () => read(rest[0], json(rest[1])),
  flow: () => flow(json(rest[0])),
  worker: () => worker(rest[0], json(rest[1], {})),
  events: () => events(rest[0]),
  watch: () => watch(rest[0], Number(rest[1] || 20)),
  raw: () => raw(json(rest[0])),
  cron: async () => out(json(rest[0]).map(([pattern, millis, tz]) =>
    getNextMillis(millis, { pattern, ...(tz ? { tz } : {}) }))),
};

// Exit only once stdout is flushed: a pipe is written asynchronously.
const exit = code => process.stdout.write('', () => process.exit(code));
modes[mode]().then(() => exit(0), err => {
  process.stderr.write(String(err && err.stack || err) + '\n');
  exit(1);
});
