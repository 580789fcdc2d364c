// Node side of the 6.7.0 parity tests (tests/interop/test_parity_*.py):
// runs a list of steps with real BullMQ and prints one JSON line per step.
//
//   node parity.mjs <redis> <stepsJson>     (<redis>: a port or a redis+cluster:// URL)
//
// Steps (arrays):
//   ["add", queue, jobId, opts]              Queue.add(jobId, {}, {jobId, ...opts})
//   ["flow", tree]                           FlowProducer.add(tree)
//   ["take", queue, {jobId: [outcome, value]}]  a manual Worker takes that many jobs
//                                            and completes, fails or holds each
//   ["retry", queue, jobId, state]           Job.retry(state)
//   ["retryJobs", queue, opts]               Queue.retryJobs(opts)
//   ["remove", queue, jobId, opts]           Queue.remove(jobId, opts), its 0/1 code
//   ["jobRemove", queue, jobId, opts]        Job.remove(opts); "locked" when it throws
//   ["promote", queue, jobId]                Job.promote()
//   ["changePriority", queue, jobId, opts]   Job.changePriority(opts)
//   ["addJob", queue, name, data, opts]      Queue.add(name, data, opts), its id
//   ["stalledCheck", queue]                  one Worker.moveStalledJobsToWait()
//   ["del", ...keys]                         DEL of raw keys
//   ["call", queue, method, args]            await Queue[method](...args)
import { FlowProducer, Job, Queue, Worker } from 'bullmq';
import { connect } from './connection.mjs';

const [target, stepsJson] = process.argv.slice(2);
const { connection, newClient } = connect(target);
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));
const out = value => process.stdout.write(JSON.stringify(value ?? null) + '\n');

const queues = new Map();
function queue(name) {
  if (!queues.has(name)) queues.set(name, new Queue(name, { connection }));
  return queues.get(name);
}

// Take as many jobs as `outcomes` names, each handled by its id's
// [outcome, value]: "complete" (value), "fail" (value = message) or "hold"
// (left active and locked). Returns the ids in the order taken. Each job
// finishes in a millisecond of its own: completed and failed are scored by
// finishedOn, and a tie orders by id, which would make the two runs of a
// parity scenario differ by chance.
async function take(name, outcomes) {
  const worker = new Worker(name, null, { connection });
  const token = 'parity-token';
  const taken = [];
  try {
    for (let i = 0; i < Object.keys(outcomes).length; i++) {
      const job = await worker.getNextJob(token, { block: false });
      if (!job || !outcomes[job.id]) throw new Error(`took ${job && job.id} from ${name}`);
      const [outcome, value] = outcomes[job.id];
      if (outcome === 'complete') await job.moveToCompleted(value, token, false);
      else if (outcome === 'fail') await job.moveToFailed(new Error(value), token, false);
      taken.push(job.id);
      await sleep(2);
    }
    return taken;
  } finally {
    await worker.close(true);
  }
}

async function jobRemove(name, jobId, opts) {
  const job = await Job.fromId(queue(name), jobId);
  try {
    await job.remove(opts);
    return 'removed';
  } catch (err) {
    if (/locked/.test(String(err))) return 'locked';
    throw err;
  }
}

const steps = {
  add: (name, jobId, opts) => queue(name).add(jobId, {}, { jobId, ...opts }).then(j => j.id),
  flow: async tree => {
    const producer = new FlowProducer({ connection });
    try {
      return (await producer.add(tree)).job.id;
    } finally {
      await producer.close();
    }
  },
  take,
  retry: async (name, jobId, state) => {
    await (await Job.fromId(queue(name), jobId)).retry(state);
    return jobId;
  },
  retryJobs: (name, opts) => queue(name).retryJobs(opts),
  remove: (name, jobId, opts) => queue(name).remove(jobId, opts),
  jobRemove,
  promote: async (name, jobId) => {
    await (await Job.fromId(queue(name), jobId)).promote();
    return jobId;
  },
  changePriority: async (name, jobId, opts) => {
    await (await Job.fromId(queue(name), jobId)).changePriority(opts);
    return jobId;
  },
  addJob: (name, jobName, data, opts) => queue(name).add(jobName, data, opts).then(j => j.id),
  stalledCheck: async name => {
    const worker = new Worker(name, null, { connection });
    try {
      await worker.waitUntilReady();
      await worker.moveStalledJobsToWait();
    } finally {
      await worker.close(true);
    }
    return name;
  },
  call: (name, method, args) => queue(name)[method](...args),
  del: async (...keys) => {
    const client = newClient();
    try {
      return await client.del(...keys);
    } finally {
      client.disconnect();
    }
  },
};

async function main() {
  for (const [kind, ...args] of JSON.parse(stepsJson)) out(await steps[kind](...args));
  for (const q of queues.values()) await q.close();
}

const exit = code => process.stdout.write('', () => process.exit(code));
main().then(() => exit(0), err => {
  process.stderr.write(String(err && err.stack || err) + '\n');
  exit(1);
});
