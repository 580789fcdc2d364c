"""Supervisors in their own processes on simulated GPUs: admission under a
random load, crash recovery, restart intensity, drain, scaling, expiry and
several hosts."""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pytest
import redis

from gpu_workers.config import QueueConfig, SupervisorConfig
from gpu_workers.exceptions import ValidationError
from gpu_workers.fleet import Fleet
from gpu_workers.supervisor import Supervisor
from queues import Queue
from tests.gpu_workers.helpers import FAST, SupervisorProcess, read_stream
from tests.helpers import wait_until

GiB = 2**30
#: Budget of one process on a simulated 24 GiB GPU: 24 - 1 reserve - 0.5
#: context - 1 margin (the defaults).
SIM24_BUDGET = int(21.5 * GiB)

Supervise = Callable[..., SupervisorProcess]


def counts(q: Queue) -> dict[str, int]:
    return q.get_counts("waiting", "active", "completed", "failed", "delayed")


def worker_of(
    fleet: Fleet, host: str | None = None, state: str | None = None
) -> dict[str, Any] | None:
    for w in fleet.list_workers(host):
        if state is None or w["state"] == state:
            return w
    return None


def test_admission_never_overcommits_200_random_jobs(
    supervise: Supervise, q: Queue, fleet: Fleet, r: redis.Redis, qname: str
) -> None:
    """200 jobs of random declared sizes on 2 simulated GPUs x 3 slots: at
    every heartbeat committed <= budget (and equals the admitted jobs' needs),
    no worker holds more jobs than slots, and the admitted intervals recorded
    per job never overlap beyond the budget. Jobs over the budget fail."""
    rng = random.Random(20261130)
    sup = supervise(gpus="sim:2x24GiB", queue={"slots": 3}, heartbeat_interval_s=0.05)
    wait_until(lambda: len(fleet.list_workers()) == 2, what="two workers")
    sizes = [
        rng.choice(
            [
                rng.uniform(0.5, 4),
                rng.uniform(4, 12),
                rng.uniform(12, 21.5),
                rng.uniform(21.6, 30) if rng.random() < 0.3 else 2.0,
            ]
        )
        for _ in range(200)
    ]
    jobs = q.add_bulk(
        [
            {
                "name": "demo",
                "data": {
                    "vram": int(s * GiB),
                    "steps": 1,
                    "step_s": round(rng.uniform(0.005, 0.06), 3),
                },
            }
            for s in sizes
        ]
    )
    too_big = {
        j.id for j, s in zip(jobs, sizes, strict=True) if int(s * GiB) > SIM24_BUDGET
    }
    wait_until(
        lambda: counts(q)["completed"] + counts(q)["failed"] == 200,
        timeout=90,
        interval=0.2,
        what="all 200 jobs to finish",
    )
    c = counts(q)
    assert (c["completed"], c["failed"]) == (200 - len(too_big), len(too_big))
    for job_id in too_big:
        assert q.get_job(job_id).failed_reason.startswith("job needs")

    beats = read_stream(r)
    assert len(beats) > 40
    packed = 0
    for beat in beats:
        admitted = [j for j in beat["running"] if j["admitted"]]
        assert beat["committed_bytes"] <= beat["budget_bytes"] == SIM24_BUDGET
        assert sum(j["declared_bytes"] for j in admitted) == beat["committed_bytes"]
        assert len(beat["running"]) <= beat["slots"] == 3
        packed += len(admitted) >= 2
    assert packed > 0, "no heartbeat ever saw two jobs sharing a GPU"

    events: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for job in jobs:
        rec = fleet.job_vram(qname, job.id)
        assert rec is not None
        if "admitted_us" in rec:
            events[rec["gpu"]] += [
                (rec["admitted_us"], rec["declared_bytes"]),
                (rec["released_us"], -rec["declared_bytes"]),
            ]
    assert set(events) == {"SIM-h1-0", "SIM-h1-1"}
    for gpu, timeline in events.items():
        committed = worst = 0
        for _, delta in sorted(timeline, key=lambda e: (e[0], e[1])):
            committed += delta
            worst = max(worst, committed)
        assert worst <= SIM24_BUDGET, f"{gpu} over-committed: {worst} bytes"
    assert all(w["max_committed_bytes"] <= SIM24_BUDGET for w in fleet.list_workers())
    assert sup.terminate() == 0


def test_sigkilled_worker_is_restarted_and_its_job_recovered(
    supervise: Supervise, q: Queue, fleet: Fleet, qname: str
) -> None:
    """SIGKILL a busy worker: the supervisor restarts it with backoff and the
    queue's stalled check returns its job to wait, where it completes. The
    process is pinned with CUDA_VISIBLE_DEVICES=<GPU uuid>."""
    supervise(queue={"lock_duration_ms": 1000, "stalled_interval_ms": 300})
    job = q.add("demo", {"vram": "4GiB", "steps": 15, "step_s": 0.1})
    busy = wait_until(lambda: worker_of(fleet, state="busy"), what="a busy worker")
    os.kill(busy["pid"], signal.SIGKILL)

    def restarted() -> dict[str, Any] | None:
        w = worker_of(fleet)
        return (
            w
            if w and w["pid"] not in (None, busy["pid"]) and w["restarts"] == 1
            else None
        )

    fresh = wait_until(restarted, timeout=10, what="the restarted worker")
    wait_until(
        lambda: q.get_job_state(job.id).value == "completed",
        timeout=20,
        what="the job to be recovered and completed",
    )
    done = q.get_job(job.id)
    assert done.stalled_counter == 1 and done.attempts_made <= 1
    assert fleet.job_vram(qname, job.id)["pid"] == fresh["pid"]
    pinned = q.add("test.env", {})
    wait_until(lambda: q.get_job_state(pinned.id).value == "completed", what="env job")
    assert q.get_job(pinned.id).returnvalue == {
        "CUDA_VISIBLE_DEVICES": "SIM-h1-0",
        "device": "SIM-h1-0",
        "torch_device": "cuda:0",
    }


def test_restart_intensity_limit_marks_worker_failed(
    supervise: Supervise, fleet: Fleet
) -> None:
    """A worker that keeps crashing is restarted at most max_restarts times
    within restart_window_s, then marked failed (and stays listed as failed)
    while the supervisor carries on."""
    sup = supervise(
        handler_modules=["tests.gpu_workers.crash_on_import"],
        max_restarts=2,
        restart_window_s=30,
    )
    failed = wait_until(
        lambda: worker_of(fleet, state="failed"),
        timeout=20,
        what="the worker to be marked failed",
    )
    assert failed["restarts"] == 2
    assert "gave up: 3 crashes within 30s (limit 2 restarts)" in failed["reason"]
    assert failed["last_exit"] == 78
    time.sleep(1.5)  # longer than the heartbeat TTL: the record is re-published
    still = worker_of(fleet, state="failed")
    assert still is not None and still["restarts"] == 2
    assert sup.proc.poll() is None
    [host] = fleet.list_hosts()
    assert [c["state"] for c in host["children"]] == ["failed"]


def test_sigterm_drains_without_losing_a_job(
    supervise: Supervise, q: Queue, fleet: Fleet
) -> None:
    """SIGTERM: workers stop claiming, finish their running jobs, and exit;
    jobs not yet claimed stay waiting and a later supervisor runs them."""
    sup = supervise(queue={"slots": 3})
    jobs = [
        q.add("demo", {"vram": "4GiB", "steps": 8, "step_s": 0.1}) for _ in range(6)
    ]
    wait_until(lambda: counts(q)["active"] == 3, what="three running jobs")
    active = {j.id for j in q.get_jobs("active")}
    assert sup.terminate(timeout=20) == 0
    c = counts(q)
    assert (c["completed"], c["waiting"], c["active"], c["failed"]) == (3, 3, 0, 0)
    assert {j.id for j in q.get_jobs("completed")} == active
    assert fleet.list_workers() == [] and fleet.list_hosts() == []
    supervise(host="h2", queue={"slots": 3})
    wait_until(lambda: counts(q)["completed"] == 6, timeout=20, what="the rest")
    assert all(q.get_job_state(j.id).value == "completed" for j in jobs)


def test_scaling_up_and_down_converges(
    supervise: Supervise, fleet: Fleet, qname: str
) -> None:
    """set_desired() is validated against the host's limits; the supervisor
    reconciles within ~2 s: new workers start, surplus ones drain away, and
    a slot change reaches live workers."""
    supervise(gpus="sim:3x24GiB", queue={"workers": 1, "max_slots": 6})
    wait_until(lambda: len(fleet.list_workers()) == 1, what="one worker")
    for bad in (
        {"workers": 4},
        {"workers": -1},
        {"slots": 7},
        {"slots": 0},
        {"workers": True},
        {},
    ):
        with pytest.raises(ValidationError):
            fleet.set_desired("h1", qname, **bad)
    with pytest.raises(ValidationError):
        fleet.set_desired("nohost", qname, workers=1)
    with pytest.raises(ValidationError):
        fleet.set_desired("h1", "other-queue", workers=1)

    t0 = time.monotonic()
    fleet.set_desired("h1", qname, workers=3)

    def children(n: int) -> bool:
        return (
            len(
                [
                    c
                    for c in fleet.list_hosts()[0]["children"]
                    if c["state"] == "running"
                ]
            )
            == n
        )

    wait_until(
        lambda: children(3),
        timeout=2.5,
        interval=0.02,
        what="the supervisor to start two more workers",
    )
    reconcile_s = time.monotonic() - t0
    wait_until(
        lambda: len([w for w in fleet.list_workers() if w["state"] == "idle"]) == 3,
        what="three idle workers",
    )
    assert reconcile_s < 2.5
    assert {w["gpu"]["uuid"] for w in fleet.list_workers()} == {
        "SIM-h1-0",
        "SIM-h1-1",
        "SIM-h1-2",
    }

    fleet.set_desired("h1", qname, workers=1, slots=5)
    wait_until(
        lambda: len(fleet.list_workers()) == 1,
        timeout=8,
        what="scale down to one worker",
    )
    wait_until(lambda: fleet.list_workers()[0]["slots"] == 5, what="slots to change")
    assert fleet.get_desired("h1") == {f"bull:{qname}": {"workers": 1, "slots": 5}}
    [gpu0, gpu1, gpu2] = fleet.list_gpus()
    assert gpu0["workers"] and not gpu1["workers"] and not gpu2["workers"]
    assert gpu0["simulated"] and gpu0["budget_bytes"] == SIM24_BUDGET


def test_heartbeats_expire_when_the_host_dies(
    supervise: Supervise, fleet: Fleet
) -> None:
    """Kill a host's supervisor and workers at once: their records vanish
    after the heartbeat TTL (1 s here), with no one cleaning up."""
    sup = supervise()
    wait_until(lambda: fleet.list_workers() and fleet.list_hosts(), what="records")
    sup.kill_group()
    assert fleet.list_hosts(), "records vanished before their TTL"
    t0 = time.monotonic()
    wait_until(
        lambda: not fleet.list_workers() and not fleet.list_hosts(),
        timeout=3,
        what="the records to expire",
    )
    assert time.monotonic() - t0 <= FAST["heartbeat_ttl_s"] + 1


def test_two_hosts_each_serve_their_own_gpus(
    supervise: Supervise, q: Queue, fleet: Fleet, qname: str
) -> None:
    """Two supervisors on one Redis with different host names: each runs its
    own GPUs' workers, both are listed, jobs run on both, and scaling one
    leaves the other alone."""
    supervise(host="alpha")
    supervise(host="beta")
    wait_until(
        lambda: {w["host"] for w in fleet.list_workers()} == {"alpha", "beta"},
        what="workers of both hosts",
    )
    assert {g["uuid"] for g in fleet.list_gpus()} == {"SIM-alpha-0", "SIM-beta-0"}
    assert [h["host"] for h in fleet.list_hosts()] == ["alpha", "beta"]
    jobs = [
        q.add("demo", {"vram": "15GiB", "steps": 3, "step_s": 0.1}) for _ in range(6)
    ]
    wait_until(lambda: counts(q)["completed"] == 6, timeout=20, what="the jobs")
    assert {fleet.job_vram(qname, j.id)["host"] for j in jobs} == {"alpha", "beta"}
    fleet.set_desired("alpha", qname, workers=0)
    wait_until(
        lambda: [w["host"] for w in fleet.list_workers()] == ["beta"],
        timeout=8,
        what="alpha to drain its worker",
    )


def test_cpu_only_host_runs_no_workers_and_does_not_crash(
    redis_url: str, fleet: Fleet
) -> None:
    """Without GPUs the supervisor runs, publishes a CPU-only host record and
    starts nothing; it stops on request."""
    config = SupervisorConfig(
        redis_url, [QueueConfig("cpuq")], host="cpu-host", gpus="none", **FAST
    )  # type: ignore[arg-type]
    sup = Supervisor(config)
    thread = threading.Thread(
        target=sup.run, kwargs={"install_signals": False}, daemon=True
    )
    thread.start()
    host = wait_until(lambda: fleet.list_hosts(), what="the host record")[0]
    assert host["mode"] == "cpu" and host["gpus"] == []
    assert host["queues"]["bull:cpuq"]["max_workers"] == 0
    time.sleep(0.5)
    assert fleet.list_workers() == []
    sup.stop()
    thread.join(10)
    assert not thread.is_alive() and fleet.list_hosts() == []


def test_desired_counts_lost_from_redis_are_written_back_not_read_as_zero(
    supervise: Supervise, fleet: Fleet, qname: str, r: redis.Redis
) -> None:
    """Redis losing the desired-count hash (a restart without persistence, a
    flush, failover to an empty replica) must not drain the host: the
    supervisor writes back the operator's last counts and keeps its workers."""
    supervise(gpus="sim:3x24GiB", queue={"workers": 3, "max_slots": 6})
    wait_until(lambda: len(fleet.list_workers()) == 3, what="three workers")
    fleet.set_desired("h1", qname, workers=2, slots=4)
    wait_until(lambda: len(fleet.list_workers()) == 2, timeout=8, what="two workers")
    pids = {w["pid"] for w in fleet.list_workers()}

    r.delete("bullpen:desired:h1")
    wait_until(
        lambda: fleet.get_desired("h1").get(f"bull:{qname}"),
        what="the desired counts to be written back",
    )
    assert fleet.get_desired("h1") == {f"bull:{qname}": {"workers": 2, "slots": 4}}
    time.sleep(1.0)  # several reconcile rounds
    hosts = fleet.list_hosts()
    running = [c for c in hosts[0]["children"] if c["state"] == "running"]
    assert len(running) == 2
    assert {w["pid"] for w in fleet.list_workers()} == pids
