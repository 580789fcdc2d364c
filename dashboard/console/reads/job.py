"""The job page's read model: a job with its state, newest log lines, VRAM
record (or what a live GPU worker says of it) and flow tree."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis

from dashboard.shared import conf
from dashboard.shared.discovery import QueueRef, parse_queue_entry
from dashboard.shared.redis import client, queue
from queues import FlowProducer, Job, JobNode
from queues.drive import cmd, gather
from queues.keys import QueueKeys
from queues.state import JobState

from . import fleet_snapshot, gpu_fleet, run

#: Children of each outcome shown per parent in a job's flow tree.
FLOW_CHILDREN = 10
#: Log lines the job page shows (the newest ones).
LOG_LINES = 200


@dataclass
class JobDetail:
    """Everything the job page shows about one job."""

    job: Job
    state: str
    logs: list[str]
    log_total: int
    vram: dict[str, Any] | None
    flow: JobNode | None
    parent_ref: QueueRef | None
    parent_id: str | None
    #: When a delayed job is due (epoch ms), from its delayed score.
    run_at_ms: int | None = None


def job_detail(ref: QueueRef, job_id: str, whole: bool = False) -> JobDetail | None:
    """A job with its state, newest log lines, VRAM record and flow tree
    (values over `conf.detail_value_max_bytes` left out unless `whole`)."""
    q = queue(ref.prefix, ref.name)
    cap = None if whole else conf.get().detail_value_max_bytes
    job, job_state = q.get_job_with_state(job_id, cap)
    if job is None:
        return None
    state = job_state.value
    lines, total = q.get_job_logs(job_id, 0, LOG_LINES - 1, asc=False)
    try:
        vram = gpu_fleet().job_vram(ref.name, job_id, ref.prefix)
        if vram is None and state == JobState.ACTIVE.value:
            vram = running_vram(ref, job_id)
    except redis.RedisError:
        vram = None
    if vram is not None:
        vram["wait_ms"] = vram_wait_ms(vram)
    parent_ref = parent_id = None
    if job.parent and isinstance(job.parent.get("queueKey"), str):
        parent_ref = parse_queue_entry(job.parent["queueKey"])
        parent_id = str(job.parent.get("id", ""))
    flow = None
    if state == JobState.WAITING_CHILDREN.value or _has_children(ref, job_id):
        flow = FlowProducer(client(), ref.prefix).get_flow(
            ref.name, job_id, depth=2, max_children=FLOW_CHILDREN, prefix=ref.prefix
        )
    return JobDetail(
        job,
        state,
        list(reversed(lines)),
        total,
        vram,
        flow,
        parent_ref,
        parent_id,
        due_ms(ref, job_id) if state == JobState.DELAYED.value else None,
    )


#: A delayed score is the due time in ms times this, plus a counter.
DELAYED_SCORE_PER_MS = 4096


def due_ms(ref: QueueRef, job_id: str) -> int | None:
    """When a delayed job is due (epoch ms), or None when it is not delayed:
    its `timestamp + delay` is wrong after a retry's backoff, the score is not."""
    score = run(cmd("ZSCORE", QueueKeys(ref.name, ref.prefix).delayed, job_id))
    return None if score is None else int(float(score)) // DELAYED_SCORE_PER_MS


def due_times(ref: QueueRef, job_ids: Sequence[str]) -> dict[str, int]:
    """When each of these delayed jobs is due (epoch ms), in one round trip;
    jobs no longer delayed are left out."""
    if not job_ids:
        return {}
    delayed = QueueKeys(ref.name, ref.prefix).delayed
    scores = run(cmd("ZMSCORE", delayed, *job_ids))
    return {
        i: int(float(score)) // DELAYED_SCORE_PER_MS
        for i, score in zip(job_ids, scores)
        if score is not None
    }


def vram_wait_ms(vram: dict[str, Any]) -> int | None:
    """How long the job held a slot waiting for VRAM before it started (so
    far, while it still waits), or None when unknown."""
    claimed, started = vram.get("claimed_ms"), vram.get("started_ms")
    if not isinstance(claimed, int):
        return None
    if isinstance(started, int):
        return max(started - claimed, 0)
    if vram.get("live") and vram.get("outcome") == "waiting-for-vram":
        return max(int(time.time() * 1000) - claimed, 0)
    return None


def running_vram(ref: QueueRef, job_id: str) -> dict[str, Any] | None:
    """What the live GPU workers' heartbeats say of a job they hold now (its
    declared need and GPU; the peak is recorded when it ends), or None."""
    # From the process's fleet snapshot (bounded age), not every worker
    # record per job page.
    for w in fleet_snapshot().workers:
        if (w.get("prefix"), w.get("queue")) != (ref.prefix, ref.name):
            continue
        for job in w.get("running") or []:
            if str(job.get("id")) == job_id:
                return {
                    "declared_bytes": job.get("declared_bytes"),
                    "peak_bytes": None,
                    "gpu": (w.get("gpu") or {}).get("uuid", ""),
                    "simulated": w.get("simulated"),
                    "host": w.get("host"),
                    "worker": w.get("id"),
                    "outcome": job.get("state", "running"),
                    "claimed_ms": job.get("claimed_ms"),
                    "started_ms": job.get("started_ms"),
                    "live": True,
                }
    return None


def _has_children(ref: QueueRef, job_id: str) -> bool:
    keys = QueueKeys(ref.name, ref.prefix)
    return bool(
        run(
            cmd(
                "EXISTS",
                keys.dependencies(job_id),
                keys.processed(job_id),
                keys.failed_children(job_id),
                keys.unsuccessful(job_id),
            )
        )
    )


def find_job(refs: Sequence[QueueRef], job_id: str) -> list[QueueRef]:
    """The queues that hold a job with this id (one round trip)."""
    found = run(
        gather([cmd("EXISTS", QueueKeys(r.name, r.prefix).job(job_id)) for r in refs])
    )
    return [r for r, n in zip(refs, found) if n]
