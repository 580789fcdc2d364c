"""Plain helpers: jobs put in each state the way a worker would, and htmx posts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis
from django.test import Client
from django.urls import reverse

from gpu_workers import Fleet
from gpu_workers.heartbeat import queue_heartbeat
from gpu_workers.keys import BullpenKeys
from queues import Queue, codec, ops
from tests.helpers import stop_process
from tests.queues.transitions.helpers import (
    claimed,
    entry,
    move_to_active,
    move_to_finished,
)

#: The checkout (a process of its own imports Bullpen from it).
CHECKOUT = Path(__file__).resolve().parents[2]
HX = {"HTTP_HX_REQUEST": "true"}
GiB = 2**30
#: A simulated GPU and an NVML one as a supervisor's heartbeat lists them.
SIM_GPU: dict[str, Any] = {
    "uuid": "SIM-h1-0",
    "index": 0,
    "name": "Simulated 24GiB",
    "simulated": True,
    "memory_total_bytes": 24 * GiB,
    "memory_used_bytes": 0,
}
H200_GPU: dict[str, Any] = {
    "uuid": "GPU-abc",
    "index": 1,
    "name": "NVIDIA H200",
    "simulated": False,
    "memory_total_bytes": 141 * GiB,
    "memory_used_bytes": 40 * GiB,
    "memory_free_bytes": 101 * GiB,
    "utilization_gpu_pct": 87,
    "temperature_c": 61,
    "power_w": 412.5,
    "power_limit_w": 700,
}


def beat(
    r: redis.Redis,
    kind: str,
    ident: str,
    record: dict[str, Any],
    ttl_s: float = 30,
    seen_ms: int | None = None,
) -> None:
    """Publish one heartbeat record as a worker or supervisor does; with
    `seen_ms`, as one last seen then (its index entry expiring `ttl_s` after)."""
    keys = BullpenKeys()
    pipe = r.pipeline(transaction=False)
    queue_heartbeat(pipe, keys, kind, ident, record, ttl_s)
    if seen_ms is not None:
        index = keys.hosts if kind == "host" else keys.workers
        pipe.zadd(index, {ident: seen_ms + int(ttl_s * 1000)})
    pipe.execute()


def run_jobs(
    q: Queue,
    n: int = 1,
    target: str = "failed",
    value: Any = "boom",
    name: str = "job",
    data: Any = None,
    fields: list[str] | None = None,
) -> list[str]:
    """Add n jobs to a queue with nothing else waiting, claim them and finish
    them as `target`; returns their ids.
    `value` is the failedReason (failed) or the return value (completed)."""
    now = ops.now_ms()
    ids = [q.add(name, data if data is not None else {"i": i}).id for i in range(n)]
    got = claimed(move_to_active(q, now=now, count=n))
    assert sorted(i for i, _, _ in got) == sorted(ids)
    entries = [
        entry(
            job_id,
            target,
            value=value if target == "failed" else codec.dumps(value),
            token=token,
            fields=fields,
        )
        for job_id, token, _ in got
    ]
    move_to_finished(q, entries, now=now + 5)
    return ids


def make_active(q: Queue, name: str = "job", data: Any = None) -> str:
    """Add a job and claim it as a worker does; returns its id."""
    job = q.add(name, data if data is not None else {})
    got = claimed(move_to_active(q, now=ops.now_ms(), count=1, name="gpu-host-1"))
    assert got[0][0] == job.id
    return str(job.id)


def job_url(q: Queue, job_id: str, *tail: str) -> str:
    """The job page, or one of its actions (`job_url(q, id, "retry")`)."""
    if tail:
        return reverse("bullpen:job-action", args=[q.prefix, q.name, job_id, tail[0]])
    return reverse("bullpen:job", args=[q.prefix, q.name, job_id])


def queue_url(q: Queue, verb: str | None = None) -> str:
    """The queue page, or one of its actions."""
    if verb:
        return reverse("bullpen:queue-action", args=[q.prefix, q.name, verb])
    return reverse("bullpen:queue", args=[q.prefix, q.name])


def hx_post(client: Client, url: str, data: dict[str, Any] | None = None) -> Any:
    """POST as htmx does (the response is a fragment)."""
    return client.post(url, data or {}, **HX)


@contextmanager
def simulated_supervisor(redis_url: str, host: str, queue: str) -> Iterator[Fleet]:
    """A real supervisor (`python -m gpu_workers`) of `host` on two simulated
    24 GiB GPUs working `queue` with one worker at first (2 slots), demo
    handlers, fast heartbeats; yields a Fleet reading it, stops it after."""
    config = {
        "queues": [{"queue": queue, "slots": 2, "workers": 1}],
        "handler_modules": ["gpu_workers.demo_handlers"],
        "heartbeat_interval_s": 0.5,
        "heartbeat_ttl_s": 3,
    }
    argv = ["--redis-url", redis_url, "--gpus", "sim:2x24GiB", "--host", host]
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpu_workers", *argv, "--config", json.dumps(config)],
        cwd=Path(__file__).resolve().parents[2],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    fleet = Fleet(redis_url)
    try:
        yield fleet
    finally:
        stop_process(proc, 30)
        fleet.close()


def ready_workers(fleet: Fleet) -> list[dict[str, Any]]:
    """The fleet's workers that are up (idle or busy)."""
    return [w for w in fleet.list_workers() if w.get("state") in ("idle", "busy")]


def gpu_fleet(r: redis.Redis) -> None:
    """A host with one simulated GPU and one NVML-like GPU, and a busy worker."""
    sim, real = SIM_GPU, H200_GPU
    beat(
        r,
        "host",
        "h1",
        {
            "host": "h1",
            "state": "running",
            "gpus": [sim, real],
            "queues": {},
            "ts_ms": 1_700_000_000_000,
        },
    )
    beat(
        r,
        "worker",
        "h1:bull:gpu:GPU-abc",
        {
            "id": "h1:bull:gpu:GPU-abc",
            "host": "h1",
            "queue": "gpu",
            "prefix": "bull",
            "gpu": {**real},
            "slots": 3,
            "budget_bytes": 138 * GiB,
            "committed_bytes": 30 * GiB,
            "running": [{"id": "7", "progress": 10}],
            "counters": {
                "processed": 12,
                "failed": 2,
                "oom": 1,
                "cancelled": 0,
                "too_big": 0,
            },
            "restarts": 2,
            "state": "busy",
            "ts_ms": 1_700_000_001_500,
        },
    )
    beat(
        r,
        "worker",
        "h1:bull:gpu:SIM-h1-0",
        {
            "id": "h1:bull:gpu:SIM-h1-0",
            "host": "h1",
            "queue": "gpu",
            "prefix": "bull",
            "gpu": {**sim, "memory_used_bytes": 3 * GiB},
            "slots": 3,
            "budget_bytes": 21 * GiB,
            "committed_bytes": 8 * GiB,
            "running": [],
            "counters": {},
            "restarts": 0,
            "state": "idle",
            "ts_ms": 1_700_000_001_000,
        },
    )
    r.hset("bullpen:gpu:GPU-abc:counters", "oom_total", 3)


def fill_every_family(r: redis.Redis, q: Queue) -> None:
    """Redis state under which /metrics answers every family it has: a GPU
    fleet, a finished job, BullMQ's metrics counters, a waiting job."""
    gpu_fleet(r)
    run_jobs(q, 1, target="completed", value=1)
    r.hset(f"{q.prefix}:{q.name}:metrics:completed", "count", 1)
    r.hset(f"{q.prefix}:{q.name}:metrics:failed", "count", 1)
    q.add("waiting", {})


def django_process(
    code: str,
    settings_module: str,
    *args: str,
    cwd: Path | None = None,
    path: tuple[Path, ...] = (),
    **env: str,
) -> subprocess.CompletedProcess[str]:
    """Run `code` (`python -c`, with `args`) in a process of its own under
    `settings_module`: none of this process's BULLPEN_*, DJANGO_* or
    REDIS_URL reaches it (a host project reads its own), a test secret key,
    the checkout and `path` importable, and `env` on top."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("BULLPEN_", "DJANGO_")) and k != "REDIS_URL"
    }
    clean.update(
        DJANGO_SETTINGS_MODULE=settings_module,
        DJANGO_SECRET_KEY="process-test-" + "k" * 40,
        PYTHONPATH=os.pathsep.join([*map(str, path), str(CHECKOUT)]),
        **env,
    )
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd or CHECKOUT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=180,
    )


def get_while_hung(server: Any, client: Client, path: str) -> tuple[Any, float]:
    """GET `path` while `server` (a RedisServer) is stopped (SIGSTOP: its
    connections open, no replies; SIGCONT after): the response and the
    seconds it took."""
    assert server.proc is not None
    server.proc.send_signal(signal.SIGSTOP)
    try:
        started = time.monotonic()
        response = client.get(path)
        return response, time.monotonic() - started
    finally:
        server.proc.send_signal(signal.SIGCONT)
