"""A worker in its own process, for the tests that need several processes,
SIGKILL or SIGTERM:

    python -m tests.queues.worker.worker_proc '{"url": ..., "queue": ...,
        "sync": false, "hang": false, "options": {AsyncWorker kwargs}}'

`Worker.run()` blocks until SIGTERM/SIGINT. The processor records, under
`test:{queue}:` (see helpers.rec_key):

- `ready`: list of pids whose worker is built and about to run;
- `started`: list of JSON {id, pid, ms, running} per start;
- `starts` / `done`: hashes job id -> times started / finished;
- `running`: jobs running now across processes (INCR at start, DECR at end).

`data.sleep_ms` makes a job take that long; with `hang` every job sleeps
for an hour after it has started (to be killed mid-job).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import time
from typing import Any

from queues import Job, Worker
from queues.connection import sync_client
from tests.queues.worker.helpers import rec_key

HANG_S = 3600.0

#: At a start, in one step: count it in `running` and `starts`, log it in
#: `started` with the `running` count it made.
START_LUA = """
local running = redis.call("INCR", KEYS[1])
redis.call("HINCRBY", KEYS[2], ARGV[1], 1)
redis.call("RPUSH", KEYS[3], cjson.encode({id = ARGV[1], pid = tonumber(ARGV[2]),
  ms = tonumber(ARGV[3]), running = running}))
return running
"""
#: At the end: one fewer running, and count it in `done`.
DONE_LUA = """
redis.call("DECR", KEYS[1])
return redis.call("HINCRBY", KEYS[2], ARGV[1], 1)
"""


def main() -> None:
    config = json.loads(sys.argv[1])
    qname = config["queue"]
    hang = config["hang"]
    pid = os.getpid()
    logging.basicConfig(
        level=logging.WARNING,
        stream=sys.stderr,
        format=f"[{pid}] %(asctime)s %(name)s %(message)s",
    )

    running, starts, started, done = (
        rec_key(qname, k) for k in ("running", "starts", "started", "done")
    )
    scripts: dict[int, tuple[Any, Any]] = {}  # per client: (start, done)

    def recorders(client: Any) -> tuple[Any, Any]:
        if id(client) not in scripts:
            scripts[id(client)] = (
                client.register_script(START_LUA),
                client.register_script(DONE_LUA),
            )
        return scripts[id(client)]

    def sleep_s(job: Job) -> float:
        if hang:
            return HANG_S
        data = job.data if isinstance(job.data, dict) else {}
        return float(data.get("sleep_ms", 0)) / 1000

    async def async_processor(job: Job) -> Any:
        record_start, record_done = recorders(job.queue.client)
        now = int(time.time() * 1000)
        await record_start([running, starts, started], [job.id, pid, now])
        seconds = sleep_s(job)
        if seconds:
            await asyncio.sleep(seconds)
        await record_done([running, done], [job.id])
        return {"pid": pid}

    def sync_processor(job: Job) -> Any:
        record_start, record_done = recorders(job.queue.client)
        now = int(time.time() * 1000)
        record_start([running, starts, started], [job.id, pid, now])
        seconds = sleep_s(job)
        if seconds:
            time.sleep(seconds)
        record_done([running, done], [job.id])
        return {"pid": pid}

    processor = sync_processor if config["sync"] else async_processor
    worker = Worker(qname, processor, connection=config["url"], **config["options"])
    ready = sync_client(config["url"])  # a plain or cluster URL
    ready.rpush(rec_key(qname, "ready"), str(pid))
    ready.close()
    worker.run()
    print(f"[{pid}] worker exited cleanly", flush=True)


if __name__ == "__main__":
    main()
