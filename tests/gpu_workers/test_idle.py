"""An idle GPU worker is almost silent in Redis (issue 26), yet a scale
change or a cancel reaches it within a second (pushed on the control
streams, control.py), and a dead host or a hung worker still leaves the
listing within about the heartbeat TTL (vouched heartbeats, heartbeat.py)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import Any

import redis

import gpu_workers.demo_handlers  # noqa: F401 - registers `demo`
from gpu_workers import defaults
from gpu_workers.exceptions import CANCEL_REASON
from gpu_workers.fleet import Fleet
from gpu_workers.heartbeat import queue_heartbeat
from gpu_workers.keys import BullpenKeys
from queues import Queue
from tests.gpu_workers.helpers import (
    FAST,
    SupervisorProcess,
    WorkerThread,
    make_spec,
)
from tests.helpers import wait_until

Supervise = Callable[..., SupervisorProcess]

#: The worker's own cancel poll and safety re-read are slower than this, so
#: only a push can make a change within it.
SLOW_POLL_S = 5.0


def live_host(r: redis.Redis, host: str, qname: str) -> None:
    """A host record that set_desired() validates against (no supervisor)."""
    pipe = r.pipeline(transaction=False)
    record = {
        "host": host,
        "queues": {f"bull:{qname}": {"max_workers": 1, "max_slots": 8}},
    }
    queue_heartbeat(pipe, BullpenKeys(), "host", host, record, 60.0)
    pipe.execute()


def watching(w: WorkerThread) -> Any:
    """The worker once its control read is blocking."""
    worker = wait_until(lambda: w.worker, what="the worker")
    watch = worker.upkeep.control
    wait_until(lambda: watch.reads >= 1, what="the control read")
    return worker


def test_scale_change_reaches_an_idle_worker_within_a_second(
    redis_url: str,
    qname: str,
    r: redis.Redis,
    fleet: Fleet,
    workers: list[WorkerThread],
) -> None:
    """set_desired() announces the change; the idle worker, blocked on its
    control streams, resizes at once, not at its next safety re-read."""
    live_host(r, "t", qname)
    w = WorkerThread(make_spec(redis_url, qname, control_interval_s=SLOW_POLL_S))
    workers.append(w)
    worker = watching(w)
    assert worker.claims.slots == 3
    fleet.set_desired("t", qname, slots=5)
    t0 = time.monotonic()
    wait_until(lambda: worker.claims.slots == 5, timeout=1.0, what="the resize")
    assert time.monotonic() - t0 < 1.0


def test_cancel_reaches_a_running_job_within_a_second(
    redis_url: str, qname: str, q: Queue, fleet: Fleet, workers: list[WorkerThread]
) -> None:
    """With its cancel poll slowed to 5 s, a running job still ends
    cancelled within a second of request_cancel(): the push wakes the worker."""
    spec = make_spec(redis_url, qname, slots=1, control_interval_s=SLOW_POLL_S)
    w = WorkerThread(spec)
    workers.append(w)
    watching(w)
    job = q.add("demo", {"vram": "1GiB", "steps": 400, "step_s": 0.05})
    wait_until(lambda: (q.get_job(job.id).progress or 0) > 0, what="progress")
    fleet.request_cancel(qname, job.id)
    t0 = time.monotonic()
    wait_until(
        lambda: q.get_job_state(job.id).value == "failed",
        timeout=1.0,
        what="the cancel",
    )
    assert time.monotonic() - t0 < 1.0
    assert q.get_job(job.id).failed_reason == CANCEL_REASON


def test_killed_supervisor_leaves_with_its_workers_within_the_ttl(
    supervise: Supervise, fleet: Fleet
) -> None:
    """SIGKILL the supervisor alone: nobody vouches for the host any more,
    its workers see their parent gone and drain; all leave the listing
    within the TTL (1 s here) and a beat."""
    sup = supervise(gpus="sim:2x24GiB")
    wait_until(
        lambda: len(fleet.list_workers()) == 2 and fleet.list_hosts(), what="records"
    )
    os.kill(sup.pid, signal.SIGKILL)
    t0 = time.monotonic()
    wait_until(
        lambda: not fleet.list_workers() and not fleet.list_hosts(),
        timeout=FAST["heartbeat_ttl_s"] + 3,
        what="the host and its workers to leave",
    )
    assert time.monotonic() - t0 <= FAST["heartbeat_ttl_s"] + 1


def test_hung_worker_leaves_within_about_the_ttl(
    supervise: Supervise, fleet: Fleet
) -> None:
    """A SIGSTOPped worker stops rewriting its liveness file: its supervisor
    stops vouching for it (its expiry counts from its last beat), so it
    leaves within about the TTL while the host and the other worker stay."""
    supervise(gpus="sim:2x24GiB")
    listed = wait_until(
        lambda: (w := fleet.list_workers()) and len(w) == 2 and w, what="two workers"
    )
    victim = listed[0]
    os.kill(victim["pid"], signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        wait_until(
            lambda: victim["id"] not in {w["id"] for w in fleet.list_workers()},
            timeout=FAST["heartbeat_ttl_s"] + 3,
            what="the hung worker to leave",
        )
        assert time.monotonic() - t0 <= FAST["heartbeat_ttl_s"] + 1
        assert [w["id"] for w in fleet.list_workers()] == [listed[1]["id"]]
        assert fleet.list_hosts()
    finally:
        os.kill(victim["pid"], signal.SIGCONT)


def commands(r: redis.Redis) -> int:
    return int(r.info("stats")["total_commands_processed"])


def calls(r: redis.Redis) -> dict[str, int]:
    """Calls per command so far (INFO commandstats)."""
    return {k[8:]: int(v["calls"]) for k, v in r.info("commandstats").items()}


def test_idle_host_sends_at_most_one_command_per_gpu_per_second(
    supervise: Supervise, fleet: Fleet, r: redis.Redis
) -> None:
    """An idle host of 8 GPUs at the default intervals, over a minute (so
    every per-minute and per-30-s chore, the series sample included, falls
    in it): Redis processes at most 8 commands a second for it, counted by
    Redis itself (commands inside scripts included), this test's own reads
    too. Its handlers declare models, so the model upkeep and the warm-pool
    planner (the host's supervisor plans) count too (docs/scaling.md)."""
    gpus = 8
    supervise(
        gpus=f"sim:{gpus}x24GiB",
        handler_modules=[
            "gpu_workers.demo_handlers",
            "tests.gpu_workers.handlers_for_tests",
        ],
        heartbeat_interval_s=defaults.HEARTBEAT_INTERVAL_S,
        heartbeat_ttl_s=defaults.HEARTBEAT_TTL_S,
        reconcile_interval_s=defaults.RECONCILE_INTERVAL_S,
        control_interval_s=defaults.CONTROL_INTERVAL_S,
    )
    wait_until(lambda: len(fleet.list_workers()) == gpus, timeout=60, what="workers")
    time.sleep(3.0)  # the workers' first reads and records
    window_s = 60.0
    stats, before = calls(r), commands(r)
    t0 = time.monotonic()
    time.sleep(window_s)
    spent = time.monotonic() - t0
    sent = commands(r) - before
    top = sorted(((n - stats.get(k, 0), k) for k, n in calls(r).items()), reverse=True)
    assert len(fleet.list_workers()) == gpus, "a worker left while idle"
    assert sent <= spent * gpus, (
        f"{sent} commands in {spent:.0f} s for {gpus} GPUs; most: {top[:10]}"
    )
