"""GpuWorker in-process on a simulated GPU (or recorded NVML readings):
admission, too-big jobs, peaks, OOMs, cancellation and heartbeats."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
import redis

import gpu_workers.demo_handlers  # noqa: F401,E402 - registers `demo`
from gpu_workers.exceptions import CANCEL_REASON, OOM_REASON
from gpu_workers.fleet import Fleet
from gpu_workers.probe import NvmlProbe
from queues import Queue
from tests.gpu_workers import handlers_for_tests  # noqa: F401 - registers test handlers
from tests.gpu_workers.fake_nvml import FakeNvml
from tests.gpu_workers.helpers import WorkerThread, make_spec
from tests.helpers import wait_until

GiB = 2**30


def finished(q: Queue, job_id: str) -> Any:
    """The job once completed or failed, else None."""
    state = q.get_job_state(job_id).value
    return q.get_job(job_id) if state in ("completed", "failed") else None


def test_too_big_job_fails_at_once_with_both_numbers(
    redis_url: str, qname: str, q: Queue, fleet: Fleet, workers: list[WorkerThread]
) -> None:
    """A job declaring more than the whole budget fails unrecoverably (no
    retries despite attempts=3), naming its need and the budget."""
    workers.append(WorkerThread(make_spec(redis_url, qname, budget_bytes=20 * GiB)))
    job = q.add("demo", {"vram": "30GiB"}, attempts=3)
    done = wait_until(lambda: finished(q, job.id), what="the job to fail")
    assert done.failed_reason.startswith("job needs 30.0 GiB")
    assert str(30 * GiB) in done.failed_reason and str(20 * GiB) in done.failed_reason
    assert done.attempts_made == 1
    record = fleet.job_vram(qname, job.id)
    assert record["outcome"] == "failed" and record["declared_bytes"] == 30 * GiB
    worker = workers[0].worker
    assert worker is not None and worker.counters["too_big"] == 1


def test_declared_and_peak_recorded_beside_the_job(
    redis_url: str, qname: str, q: Queue, fleet: Fleet, workers: list[WorkerThread]
) -> None:
    """The demo job's simulated peak is stored beside its declared need, in
    the Bullpen job hash and as a job log line, before the job completes."""
    workers.append(WorkerThread(make_spec(redis_url, qname)))
    job = q.add("demo", {"vram": "6GiB", "alloc": "4GiB", "steps": 2, "step_s": 0.02})
    done = wait_until(lambda: finished(q, job.id), what="the job")
    assert done.returnvalue == {"steps": 2, "held_bytes": 4 * GiB}
    record = fleet.job_vram(qname, job.id)
    assert record["declared_bytes"] == 6 * GiB
    assert record["peak_bytes"] == 4 * GiB and record["peak_source"] == "simulated"
    assert record["process_peak_bytes"] >= 4 * GiB
    assert record["gpu"] == "SIM-t-0" and record["simulated"] == 1
    lines, _ = q.get_job_logs(job.id)
    assert any(
        line.startswith("vram: declared 6.0 GiB, peak 4.0 GiB") for line in lines
    )


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ({"vram": "1GiB", "alloc": "100GiB"}, "above its declared 1.0 GiB"),
        ({"vram": "1GiB", "steps": 10**9}, "steps is 1000000000; expected 0..10000"),
        ({"vram": "1GiB", "step_s": 86_400}, "step_s is 86400; expected 0..60"),
        ({"vram": "1GiB", "steps": "many"}, "steps must be a number"),
    ],
)
def test_demo_job_data_cannot_exceed_its_declaration(
    redis_url: str,
    qname: str,
    q: Queue,
    workers: list[WorkerThread],
    data: dict[str, Any],
    reason: str,
) -> None:
    """Job data is untrusted: the demo handler never holds more than the
    declared VRAM nor runs unbounded steps; such a job fails at once (no
    retries, no OOM) and the GPU's memory is untouched."""
    workers.append(WorkerThread(make_spec(redis_url, qname)))
    job = q.add("demo", data, attempts=3)
    done = wait_until(lambda: finished(q, job.id), what="the job to fail")
    assert reason in done.failed_reason and done.attempts_made == 1
    worker = workers[0].worker
    assert worker is not None and worker.counters["oom"] == 0


def test_finished_jobs_are_counted_in_bullmq_metrics(
    redis_url: str, qname: str, q: Queue, workers: list[WorkerThread]
) -> None:
    """GPU workers keep BullMQ's per-minute metrics by default (what Node's
    getMetrics() and the dashboard's /metrics totals read): a completed and a
    too-big (failed) job each count once."""
    workers.append(WorkerThread(make_spec(redis_url, qname, budget_bytes=20 * GiB)))
    ok = q.add("demo", {"vram": "1GiB", "steps": 1, "step_s": 0.01})
    too_big = q.add("demo", {"vram": "30GiB"})
    for job in (ok, too_big):
        wait_until(lambda job=job: finished(q, job.id), what="the job")
    assert q.get_metrics("completed").meta.count == 1
    assert q.get_metrics("failed").meta.count == 1


def test_metrics_collection_can_be_turned_off(
    redis_url: str, qname: str, q: Queue, r: Any, workers: list[WorkerThread]
) -> None:
    workers.append(WorkerThread(make_spec(redis_url, qname, metrics_data_points=0)))
    job = q.add("demo", {"vram": "1GiB", "steps": 1, "step_s": 0.01})
    wait_until(lambda: finished(q, job.id), what="the job")
    assert not r.exists(f"bull:{qname}:metrics:completed")


def test_nvml_per_process_peak_on_recorded_readings(
    redis_url: str, qname: str, q: Queue, fleet: Fleet, workers: list[WorkerThread]
) -> None:
    """On an NVML device the job's peak is this process's memory read by pid."""
    nvml = FakeNvml("nvml_h200.json")
    uuid = "GPU-00000000-0000-0000-0000-0000000000h2"
    nvml.set_process_memory(0, os.getpid(), 12 * GiB)
    spec = make_spec(
        redis_url, qname, gpu_uuid=uuid, gpus="auto", budget_bytes=130 * GiB
    )
    workers.append(WorkerThread(spec, NvmlProbe(nvml)))
    job = q.add("test.sleep", {"vram": "10GiB", "s": 0.6})
    wait_until(lambda: finished(q, job.id), what="the job")
    record = fleet.job_vram(qname, job.id)
    assert record["peak_source"] == "nvml-process"
    assert record["peak_bytes"] == record["process_peak_bytes"] == 12 * GiB
    assert record["simulated"] == 0


def test_job_that_does_not_fit_waits_and_blocks_claims(
    redis_url: str, qname: str, q: Queue, fleet: Fleet, workers: list[WorkerThread]
) -> None:
    """A claimed job that does not fit waits holding its slot; meanwhile no
    other job is claimed, so the small job behind it is not taken early."""
    workers.append(WorkerThread(make_spec(redis_url, qname, budget_bytes=20 * GiB)))
    big = q.add("test.sleep", {"vram": "15GiB", "s": 0.5})
    wait_until(lambda: q.get_job_state(big.id).value == "active", what="big to start")
    second = q.add("test.sleep", {"vram": "10GiB", "s": 0.1})
    wait_until(
        lambda: q.get_job_state(second.id).value == "active",
        what="second to be claimed",
    )
    small = q.add("test.sleep", {"vram": "1GiB", "s": 0.05})
    for job in (big, second, small):
        wait_until(lambda j=job: finished(q, j.id), what=f"job {job.id}")
    rb, rs, rm = (fleet.job_vram(qname, j.id) for j in (big, second, small))
    assert rs["admitted_us"] >= rb["released_us"], "second ran beside big: over budget"
    assert rm["claimed_ms"] * 1000 >= rs["admitted_us"] - 1000, (
        "small was claimed while second waited for VRAM"
    )


def test_oom_retries_with_reason_and_worker_survives(
    redis_url: str,
    qname: str,
    q: Queue,
    fleet: Fleet,
    r: redis.Redis,
    workers: list[WorkerThread],
) -> None:
    """A CUDA OOM (simulated over-allocation, or PyTorch's message) retries per
    attempts/backoff with reason "CUDA out of memory"; the worker carries on
    and counts OOMs per GPU."""
    workers.append(WorkerThread(make_spec(redis_url, qname)))
    over = q.add(
        "test.overalloc",
        {"vram": "1GiB", "alloc": "100GiB"},
        attempts=2,
        backoff={"type": "fixed", "delay": 50},
    )
    torch_like = q.add("test.cuda_oom", {})
    done = wait_until(lambda: finished(q, over.id), what="the OOM job to fail")
    assert done.failed_reason == OOM_REASON and done.attempts_made == 2
    done2 = wait_until(lambda: finished(q, torch_like.id), what="the second OOM job")
    assert done2.failed_reason == OOM_REASON
    after = q.add("demo", {"vram": "2GiB", "steps": 1, "step_s": 0.01})
    assert wait_until(lambda: finished(q, after.id)).returnvalue["steps"] == 1
    worker = workers[0].worker
    assert worker is not None and workers[0].alive and worker.counters["oom"] == 3
    assert r.hget("bullpen:gpu:SIM-t-0:counters", "oom_total") == "3"


def test_broken_cuda_after_oom_exits_the_process(
    redis_url: str, qname: str, q: Queue, workers: list[WorkerThread]
) -> None:
    """If the self-check after an OOM fails, the worker closes and reports
    EXIT_CUDA_BROKEN (its supervisor restarts it)."""
    thread = WorkerThread(make_spec(redis_url, qname))
    workers.append(thread)
    job = q.add(
        "test.overalloc", {"vram": "1GiB", "alloc": "100GiB", "break_cuda": True}
    )
    done = wait_until(lambda: finished(q, job.id), what="the job")
    assert done.failed_reason == OOM_REASON
    wait_until(lambda: not thread.alive, timeout=10, what="the worker to exit")
    assert thread.worker is not None and thread.worker.exit_code == 70


def test_cancel_running_and_waiting_jobs(
    redis_url: str, qname: str, q: Queue, fleet: Fleet, workers: list[WorkerThread]
) -> None:
    """request_cancel(): the handler's should_stop() turns true and the job
    fails with "cancelled by operator"; a job cancelled before it was claimed
    fails as soon as it is claimed; a finished job cannot be cancelled."""
    workers.append(WorkerThread(make_spec(redis_url, qname, slots=1)))
    running = q.add("demo", {"vram": "1GiB", "steps": 100, "step_s": 0.05})
    queued = q.add("demo", {"vram": "1GiB", "steps": 1, "step_s": 0.01})
    wait_until(lambda: (q.get_job(running.id).progress or 0) > 0, what="progress")
    fleet.request_cancel(qname, queued.id)
    fleet.request_cancel(qname, running.id)
    done = wait_until(lambda: finished(q, running.id), timeout=3, what="cancel")
    assert done.failed_reason == CANCEL_REASON
    assert done.progress < 100
    done_q = wait_until(lambda: finished(q, queued.id), timeout=3, what="queued")
    assert done_q.failed_reason == CANCEL_REASON
    assert fleet.job_vram(qname, running.id)["outcome"] == "cancelled"
    with pytest.raises(ValueError, match="already failed"):
        fleet.request_cancel(qname, running.id)
    with pytest.raises(ValueError, match="does not exist"):
        fleet.request_cancel(qname, "nope")


def test_heartbeat_reports_budget_and_running_jobs(
    redis_url: str, qname: str, q: Queue, fleet: Fleet, workers: list[WorkerThread]
) -> None:
    """The worker heartbeat has host, pid, GPU snapshot, slots, committed and
    free budget, running jobs with progress, counters and state; the record
    is removed when the worker drains away."""
    thread = WorkerThread(make_spec(redis_url, qname))
    workers.append(thread)
    job = q.add("demo", {"vram": "5GiB", "steps": 40, "step_s": 0.05})

    def busy() -> dict[str, object] | None:
        for w in fleet.list_workers():
            if w["state"] == "busy" and w["running"] and w["running"][0]["progress"]:
                return w
        return None

    w = wait_until(busy, what="a busy heartbeat with progress")
    assert w["host"] == "t" and w["pid"] == os.getpid() and w["simulated"] is True
    assert w["gpu"]["uuid"] == "SIM-t-0" and w["gpu"]["simulated"] is True
    assert w["committed_bytes"] == 5 * GiB
    assert w["free_bytes"] == w["budget_bytes"] - 5 * GiB
    assert w["running"][0]["id"] == job.id and w["running"][0]["admitted"] is True
    assert set(w["counters"]) >= {"processed", "failed", "oom", "cancelled", "too_big"}
    assert json.dumps(w)
    thread.stop()
    assert fleet.list_workers() == []
    assert finished(q, job.id).returnvalue["steps"] == 40


def test_claims_and_ends_are_heartbeated_at_once(
    redis_url: str, qname: str, q: Queue, fleet: Fleet, workers: list[WorkerThread]
) -> None:
    """A job claimed, admitted or ended is in the next heartbeat within
    HEARTBEAT_SOON_S, not the next interval: with beats 30 s apart, the job
    page and the GPU page still see a new job (and its end) at once."""
    workers.append(
        WorkerThread(
            make_spec(redis_url, qname, heartbeat_interval_s=30.0, heartbeat_ttl_s=60.0)
        )
    )
    wait_until(lambda: fleet.list_workers(), what="the first heartbeat")
    job = q.add("demo", {"vram": "5GiB", "steps": 10, "step_s": 0.1})

    def listed() -> bool:
        [w] = fleet.list_workers()
        return any(r["id"] == job.id and r["admitted"] for r in w["running"])

    wait_until(listed, timeout=1.5, what="the job in a heartbeat")
    wait_until(lambda: finished(q, job.id), what="the job to finish")
    wait_until(lambda: not listed(), timeout=1.5, what="the end in a heartbeat")
    [w] = fleet.list_workers()
    assert w["committed_bytes"] == 0 and w["counters"]["processed"] == 1


def test_progress_survives_redis_dropping_every_connection(
    redis_url: str, qname: str, q: Queue, r: Any, workers: list[WorkerThread]
) -> None:
    """Redis closes every client connection mid-job (a restart, a failover, a
    proxy reset): the handler's next progress write meets a stale pooled
    connection, is retried on a fresh one, and the job completes on its first
    attempt instead of failing with "Connection closed by server"."""
    workers.append(WorkerThread(make_spec(redis_url, qname)))
    job = q.add("demo", {"vram": "1GiB", "steps": 30, "step_s": 0.05})
    wait_until(lambda: (q.get_job(job.id).progress or 0) > 0, what="progress")
    killed = r.client_kill_filter(_type="normal", skipme=True)
    assert killed >= 2
    done = wait_until(lambda: finished(q, job.id), timeout=20, what="the job")
    assert done.failed_reason is None, done.failed_reason
    assert done.returnvalue["steps"] == 30 and done.attempts_made == 1
