"""Models resident on a (simulated) GPU: loaded once and kept across jobs,
evicted by least recent use and never while a job runs on them, weights +
working memory under the budget at every moment, failed loads, and what the
worker reports (heartbeat, events stream, stats, GPU-time)."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from gpu_workers import defaults
from gpu_workers.control import announce_models
from gpu_workers.fleet import Fleet
from gpu_workers.gputime import read_totals
from gpu_workers.keys import BullpenKeys
from queues import Queue
from queues.attempts import parse_attempts
from queues.keys import attempts_key
from tests.gpu_workers import handlers_for_tests  # noqa: F401 - registers models
from tests.gpu_workers.helpers import SupervisorProcess, WorkerThread, make_spec
from tests.helpers import wait_until

GiB = 2**30
Supervise = Callable[..., SupervisorProcess]
KEYS = BullpenKeys()


def done(q: Queue, *ids: str) -> list[Any] | None:
    """The jobs once all finished, else None."""
    jobs = [q.get_job(i) for i in ids]
    if all(j is not None and j.finished_on for j in jobs):
        return jobs
    return None


def events(r: redis.Redis, gpu: str = "SIM-t-0") -> list[tuple[str, str]]:
    """(kind, model) of the GPU's model events, oldest first."""
    out = []
    for _id, fields in r.xrange(KEYS.model_events()):
        if fields["gpu"] == gpu:
            out.append((fields["kind"], fields["model"]))
    return out


def add(
    q: Queue, model: str, working: str = "1GiB", s: float = 0.05, **opts: Any
) -> str:
    return q.add("test.model", {"model": model, "working": working, "s": s}, **opts).id


def test_a_model_stays_resident_across_jobs(
    redis_url: str, qname: str, q: Queue, r: redis.Redis, workers: list[WorkerThread]
) -> None:
    """Five jobs of one model: one load; each job commits only its working
    memory beside the weights; the heartbeat lists the model resident."""
    w = WorkerThread(make_spec(redis_url, qname, slots=1))
    workers.append(w)
    ids = [add(q, "t-mid", "2GiB") for _ in range(5)]
    jobs = wait_until(lambda: done(q, *ids), what="five jobs")
    assert [j.returnvalue for j in jobs] == [{"model": "t-mid"}] * 5
    assert events(r) == [("load", "t-mid")]
    worker = w.worker
    assert worker is not None
    assert worker.admission.max_committed_bytes == 6 * GiB + 2 * GiB
    assert worker.admission.held == {"t-mid": 6 * GiB}
    key = KEYS.worker(worker.spec.worker_id)

    def idle_record() -> dict[str, Any] | None:
        # Idle, and written after the last job ended: a heartbeat written in
        # the gap between two jobs is idle too, but counts one job less (the
        # heartbeats after a job ends are coalesced, so one may still come).
        record: dict[str, Any] = json.loads(r.get(key) or "{}")
        counted = record.get("model_counters", {}).get("t-mid", {}).get("jobs", 0)
        return record if not record.get("running") and counted >= 5 else None

    record = wait_until(idle_record, what="an idle heartbeat after the fifth job")
    (entry,) = record["models"]
    assert entry["name"] == "t-mid" and entry["state"] == "resident"
    assert entry["weights_bytes"] == 6 * GiB and entry["users"] == 0
    assert record["model_counters"]["t-mid"]["loads"] == 1
    assert record["model_counters"]["t-mid"]["jobs"] == 5
    stats = json.loads(r.hget(KEYS.model_stats(), "t-mid"))
    assert stats["loads"] == 1 and stats["jobs"] == 5


def test_lru_eviction_keeps_weights_and_working_under_budget(
    redis_url: str, qname: str, q: Queue, r: redis.Redis, workers: list[WorkerThread]
) -> None:
    """Budget 20 GiB: big (12) and mid (6) stay resident together; small (2)
    then needs room for 2 + 1 working: the least recently used (big) goes."""
    w = WorkerThread(make_spec(redis_url, qname, slots=1, budget_bytes=20 * GiB))
    workers.append(w)
    order = ["t-big", "t-mid", "t-mid", "t-small"]
    ids = []
    for name in order:
        ids.append(add(q, name, "1GiB"))
        wait_until(lambda: done(q, ids[-1]), what=f"a {name} job")
    assert events(r) == [
        ("load", "t-big"),
        ("load", "t-mid"),
        ("evict", "t-big"),
        ("load", "t-small"),
    ]
    worker = w.worker
    assert worker is not None
    assert worker.admission.max_committed_bytes <= 20 * GiB
    assert set(worker.residency.resident()) == {"t-mid", "t-small"}
    assert worker.device.memory is not None
    # the simulated device holds exactly the resident weights again
    assert worker.device.memory.allocated_bytes == 8 * GiB


def test_a_model_with_a_running_job_is_never_evicted(
    redis_url: str, qname: str, q: Queue, r: redis.Redis, workers: list[WorkerThread]
) -> None:
    """Budget 16 GiB: a 12 GiB model runs a long job; a job of a 6 GiB model
    (7 with its working memory) waits for it to end instead of evicting it."""
    w = WorkerThread(make_spec(redis_url, qname, slots=2, budget_bytes=16 * GiB))
    workers.append(w)
    long = add(q, "t-big", "1GiB", s=1.0)
    wait_until(lambda: ("load", "t-big") in events(r), what="the big load")
    other = add(q, "t-mid", "1GiB")
    jobs = wait_until(lambda: done(q, long, other), what="both jobs")
    assert [j.returnvalue for j in jobs] == [{"model": "t-big"}, {"model": "t-mid"}]
    assert events(r) == [("load", "t-big"), ("evict", "t-big"), ("load", "t-mid")]
    evicted = [
        int(f["ts_ms"])
        for _i, f in r.xrange(KEYS.model_events())
        if f["kind"] == "evict" and f["model"] == "t-big"
    ]
    assert evicted[0] >= jobs[0].finished_on - 50  # after the job, not during it
    # claimed at once, it ran only once the big model was gone
    started = int(r.hget(KEYS.job("bull", qname, other), "started_ms"))
    assert started >= evicted[0]
    worker = w.worker
    assert worker is not None and worker.admission.max_committed_bytes <= 16 * GiB


def test_unknown_weights_are_measured_after_the_first_load(
    redis_url: str, qname: str, q: Queue, r: redis.Redis, workers: list[WorkerThread]
) -> None:
    """A model declared without weights reserves what is uncommitted while
    it loads, then holds what the load measurably took, remembered
    fleet-wide for the next load."""
    w = WorkerThread(make_spec(redis_url, qname, slots=1))
    workers.append(w)
    job_id = add(q, "t-unknown")
    wait_until(lambda: done(q, job_id), what="the job")
    stats = json.loads(r.hget(KEYS.model_stats(), "t-unknown"))
    assert stats["weights_bytes"] == 3 * GiB
    worker = w.worker
    assert worker is not None and worker.admission.held == {"t-unknown": 3 * GiB}
    assert worker.residency.known_weights["t-unknown"] == 3 * GiB


@pytest.mark.parametrize("placement", [False, True])
def test_a_failed_load_fails_the_job_and_backs_the_model_off(
    redis_url: str,
    qname: str,
    q: Queue,
    r: redis.Redis,
    workers: list[WorkerThread],
    placement: bool,
) -> None:
    """A load that raises fails its job with that error (attempts apply);
    the model is not loaded again on this GPU until its backoff passes:
    without placement the retry fails at once saying so; with placement the
    retry is passed over here until the backoff has passed, then loads
    again. Other models go on meanwhile."""
    w = WorkerThread(make_spec(redis_url, qname, slots=1, placement=placement))
    workers.append(w)
    first = add(q, "t-broken", attempts=2)
    ok = add(q, "t-small")
    (fine,) = wait_until(lambda: done(q, ok), what="a job of another model")
    assert fine.returnvalue == {"model": "t-small"}
    (job,) = wait_until(lambda: done(q, first), timeout=20, what="the broken job")
    assert job.attempts_made == 2 and len(job.stacktrace) == 2
    assert "loading model t-broken failed: weights file missing" in job.stacktrace[0]
    failures = [
        int(f["ts_ms"])
        for _i, f in r.xrange(KEYS.model_events())
        if f["kind"] == "load_failed"
    ]
    if placement:
        assert (
            job.failed_reason == "loading model t-broken failed: weights file missing"
        )
        assert len(failures) == 2
        assert failures[1] - failures[0] >= defaults.MODEL_LOAD_BACKOFF_S * 1000
    else:
        assert job.failed_reason.startswith("model t-broken is not loaded on GPU")
        assert len(failures) == 1
    worker = w.worker
    assert worker is not None and "t-broken" not in worker.residency.resident()
    assert worker.admission.held == {"t-small": 2 * GiB}
    counters = r.hgetall(KEYS.gpu_counters("SIM-t-0"))
    assert counters["model_load_failures"] == str(len(failures))


def test_an_oom_while_loading_evicts_and_retries_once(
    redis_url: str, qname: str, q: Queue, r: redis.Redis, workers: list[WorkerThread]
) -> None:
    """An OOM during a load evicts idle models and retries once: the job
    runs. A model that OOMs again fails its job as CUDA out of memory
    (retryable elsewhere), never crash-looping the worker."""
    w = WorkerThread(make_spec(redis_url, qname, slots=1))
    workers.append(w)
    warm = add(q, "t-small")
    wait_until(lambda: done(q, warm), what="a small job")
    once = add(q, "t-oom-once")
    (job,) = wait_until(lambda: done(q, once), what="the oom-once job")
    assert job.returnvalue == {"model": "t-oom-once"}
    assert events(r)[1:] == [
        ("load_oom", "t-oom-once"),
        ("evict", "t-small"),
        ("load", "t-oom-once"),
    ]
    always = add(q, "t-oom-always")
    (bad,) = wait_until(lambda: done(q, always), what="the oom-always job")
    assert bad.failed_reason == "CUDA out of memory"
    assert ("load_failed", "t-oom-always") in events(r)
    assert w.alive
    worker = w.worker
    assert worker is not None and worker.residency.backing_off("t-oom-always")


def test_cold_start_reads_loading_model_and_load_time_is_billed_apart(
    redis_url: str, qname: str, q: Queue, r: redis.Redis, workers: list[WorkerThread]
) -> None:
    """While a 2 s load runs, the heartbeat lists the job as loading_model
    (model, since); the load's GPU time is kept apart (name load:<model>,
    no tenant) from the job's own."""
    w = WorkerThread(make_spec(redis_url, qname, slots=1))
    workers.append(w)
    job_id = add(q, "t-slow", s=0.05)
    worker = w.worker
    assert worker is not None

    def loading() -> dict[str, Any] | None:
        raw = r.get(KEYS.worker(worker.spec.worker_id))
        record = json.loads(raw) if raw else {}
        for job in record.get("running", []):
            if job["state"] == "loading_model":
                return job
        return None

    seen = wait_until(loading, what="a loading_model heartbeat")
    assert seen["id"] == job_id and seen["model"] == "t-slow"
    assert seen["loading"]["model"] == "t-slow" and seen["loading"]["since_ms"] > 0
    assert seen["loading"]["expected_s"] == 2.0  # the model's declared hint
    (job,) = wait_until(lambda: done(q, job_id), what="the slow job")
    assert job.returnvalue == {"model": "t-slow"}
    totals = read_totals(r, KEYS)
    names = totals["name"]
    assert names["load:t-slow"].gpu_seconds >= 1.9
    assert names["test.model"].gpu_seconds < names["load:t-slow"].gpu_seconds
    assert "-" in totals["tenant"]
    stats = json.loads(r.hget(KEYS.model_stats(), "t-slow"))
    assert stats["ewma_load_s"] >= 1.9


def test_fleet_reads_the_model_fields(
    redis_url: str, qname: str, q: Queue, fleet: Fleet, workers: list[WorkerThread]
) -> None:
    """The fleet's worker records carry models, weights and working bytes."""
    w = WorkerThread(make_spec(redis_url, qname, slots=1))
    workers.append(w)
    job_id = add(q, "t-small", "1GiB", s=0.01)
    wait_until(lambda: done(q, job_id), what="a job")

    def idle_with_models() -> list[dict[str, Any]]:
        return [x for x in fleet.list_workers() if x.get("models") and not x["running"]]

    (rec,) = wait_until(idle_with_models, what="an idle record listing models")
    assert rec["weights_bytes"] == 2 * GiB and rec["working_bytes"] == 0


def test_a_worker_killed_while_loading_leaves_no_ghost_model(
    supervise: Supervise, q: Queue, fleet: Fleet, r: redis.Redis
) -> None:
    """SIGKILL a worker in the middle of a 2 s model load: the stalled check
    returns the job, the restarted worker loads the model again from
    nothing (its record never lists the dead process's model), and the job
    completes there."""
    supervise(queue={"lock_duration_ms": 1000, "stalled_interval_ms": 300})
    job_id = add(q, "t-slow")

    def loading() -> dict[str, Any] | None:
        for w in fleet.list_workers():
            if any(j.get("state") == "loading_model" for j in w.get("running", [])):
                return w
        return None

    dying = wait_until(loading, what="a worker loading t-slow")
    os.kill(dying["pid"], signal.SIGKILL)

    def restarted() -> dict[str, Any] | None:
        for w in fleet.list_workers():
            if w["pid"] not in (None, dying["pid"]) and w.get("models") is not None:
                return w
        return None

    fresh = wait_until(restarted, timeout=10, what="the restarted worker")
    assert all(m["state"] != "resident" for m in fresh["models"])
    wait_until(
        lambda: q.get_job_state(job_id).value == "completed",
        timeout=30,
        what="the job to be recovered and completed",
    )
    done = q.get_job(job_id)
    assert done.stalled_counter == 1 and done.returnvalue == {"model": "t-slow"}
    assert fleet.job_vram(q.name, job_id)["pid"] != dying["pid"]
    kinds = [(f["kind"], f["model"]) for _i, f in r.xrange(KEYS.model_events())]
    assert kinds == [("load", "t-slow")]  # only the new process's load finished
    final = wait_until(
        lambda: [w for w in fleet.list_workers() if w.get("models")], what="a record"
    )
    assert [m["name"] for m in final[0]["models"]] == ["t-slow"]


def plan_pool(r: redis.Redis, record: str) -> None:
    """Write GPU SIM-t-0's warm pool as the supervisors' planner does:
    the record, then its announcement on the control stream (control.py)."""
    r.hset(KEYS.model_pool(), "SIM-t-0", record)
    announce_models(r, KEYS, ["SIM-t-0"])


def test_an_idle_worker_preloads_its_pool_and_pins(
    redis_url: str,
    qname: str,
    r: redis.Redis,
    fleet: Fleet,
    workers: list[WorkerThread],
) -> None:
    """The warm pool the supervisors planned for this GPU, and an operator's
    pin, are loaded while the worker is idle; a pinned model is marked, and
    a model no longer wanted stays until room is needed (nothing thrashes)."""
    w = WorkerThread(make_spec(redis_url, qname, slots=1))
    workers.append(w)
    worker = w.worker
    assert worker is not None
    stale = {"models": ["t-big"], "ts_ms": 1}  # no supervisor plans any more
    plan_pool(r, json.dumps(stale))
    fleet.pin_model("SIM-t-0", "t-small")
    wait_until(lambda: ("load", "t-small") in events(r), what="the pinned model loaded")
    now = int(time.time() * 1000)
    plan_pool(r, json.dumps({"models": ["t-mid"], "ts_ms": now}))
    wait_until(lambda: ("load", "t-mid") in events(r), what="the pool's model loaded")
    assert ("load", "t-big") not in events(r)  # the stale record was ignored

    def listed() -> dict[str, Any] | None:
        record = json.loads(r.get(KEYS.worker(worker.spec.worker_id)) or "{}")
        models = {m["name"]: m for m in record.get("models", [])}
        return models if {"t-mid", "t-small"} <= set(models) else None

    models = wait_until(listed, what="both models in the heartbeat")
    assert models["t-small"]["pinned"] and models["t-small"]["wanted"]
    assert models["t-mid"]["wanted"] and not models["t-mid"]["pinned"]
    now = int(time.time() * 1000)
    plan_pool(r, json.dumps({"models": [], "ts_ms": now}))
    wait_until(lambda: "t-mid" not in worker.residency.wanted(), what="the new pool")
    assert set(worker.residency.resident()) == {"t-mid", "t-small"}  # kept, idle
    assert [k for k, _m in events(r)].count("evict") == 0


@pytest.mark.parametrize("per_gpu", [True, False], ids=["gpu-process", "queue-process"])
def test_vram_its_process_cannot_give_back_recycles_it_and_loses_no_job(
    supervise: Supervise, q: Queue, fleet: Fleet, r: redis.Redis, per_gpu: bool
) -> None:
    """t-leaky keeps its 12 GiB when evicted (a model holding a reference of
    its own): a t-big job that needs them waits with nothing running, and
    idle readings keep showing them held. The process (a GPU's process, or
    one queue's) gives the job back to the front of the queue (not an
    attempt, not a stall) and exits EXIT_RECYCLE; the supervisor starts it
    again at once, not as a crash, and the new process (a new context:
    nothing leaked) runs the job."""
    sup = supervise(process_per_gpu=per_gpu)
    first = add(q, "t-leaky")
    wait_until(lambda: done(q, first), what="the t-leaky job")
    second = add(q, "t-big")
    wait_until(
        lambda: q.get_job_state(second).value == "completed",
        timeout=30,
        what="the t-big job, run by the recycled process",
    )
    job = q.get_job(second)
    assert (job.attempts_made, job.attempts_started) == (1, 2)
    assert job.stalled_counter == 0 and job.returnvalue == {"model": "t-big"}
    assert fleet.job_vram(q.name, second)["pid"] != fleet.job_vram(q.name, first)["pid"]
    kinds = [(f["kind"], f["model"]) for _i, f in r.xrange(KEYS.model_events())]
    assert kinds == [("load", "t-leaky"), ("evict", "t-leaky"), ("load", "t-big")]
    returned = [
        f
        for _i, f in r.xrange(q.keys.events)
        if f.get("event") == "waiting" and f.get("jobId") == second
    ]
    assert [f.get("prev") for f in returned] == [None, "active"]
    history = parse_attempts(
        r.lrange(attempts_key("bullpen", q.keys.prefix, q.name, second), 0, -1)
    )
    assert [(a["attempt"], a["outcome"], a["gpu"]) for a in history] == [
        (1, "returned", "SIM-h1-0"),
        (2, "completed", "SIM-h1-0"),
    ]
    assert history[0]["pid"] != history[1]["pid"]
    log = sup.log()
    assert "recycled to free VRAM its process could not give back" in log, log
    assert "exited with status" not in log, log
