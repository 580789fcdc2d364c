"""Worker telemetry: job start/complete/fail/retry, rate-limit hits, worker
start/stop and stalled-check counts, as OpenTelemetry spans and metrics (the
real SDK with its in-memory exporters) and as the worker's own counters; a
no-op without the `opentelemetry` package."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from typing import Any

import redis
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode

from queues import AsyncWorker, Job, JobState, Queue, Worker
from queues.telemetry import Telemetry
from tests.helpers import wait_until
from tests.queues.worker.helpers import REPO_ROOT, WorkerThread


def flaky(job: Job) -> Any:
    if job.data.get("fail_first") and job.attempts_made == 0:
        raise RuntimeError("first attempt fails")
    if job.data.get("fail"):
        raise ValueError("always fails")
    return job.data.get("n", 0)


def points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    """Every data point of every metric the reader collected, by name."""
    found: dict[str, list[Any]] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                found.setdefault(metric.name, []).extend(metric.data.data_points)
    return found


def by_outcome(found: dict[str, list[Any]], name: str) -> dict[str, Any]:
    return {p.attributes["outcome"]: p for p in found[name]}


def test_worker_records_spans_metrics_and_counters(
    redis_url: str, q: Queue, r: redis.Redis
) -> None:
    """Jobs that complete, retry and fail, a rate limit that stops claims and
    a stalled check that recovers an orphan (which then fails for stalling)
    show as spans, metrics and counters; the worker gauge returns to 0."""
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    orphan = q.add("orphan", {"n": 9})
    r.lrem(q.keys.wait, 0, orphan.id)
    r.lpush(q.keys.active, orphan.id)
    r.sadd(q.keys.stalled, orphan.id)
    r.delete(q.keys.marker)
    ok = q.add("ok", {"n": 1})
    retried = q.add("retried", {"fail_first": True}, attempts=2)
    doomed = q.add("doomed", {"fail": True})
    worker = Worker(
        q.name,
        flaky,
        connection=redis_url,
        drain_delay=0.2,
        max_stalled_count=0,
        limiter={"max": 2, "duration": 300},
        telemetry=Telemetry(tracer_provider, meter_provider),
    )
    handle = WorkerThread(worker)
    handle.thread.start()
    try:
        wait_until(lambda: q.get_counts("failed")["failed"] == 2, what="failures")
        wait_until(lambda: q.get_counts("completed")["completed"] == 2)
    finally:
        handle.stop()
    assert q.get_job_state(ok.id) is JobState.COMPLETED
    assert q.get_job(orphan.id).failed_reason == "job stalled more than allowable limit"
    assert worker.telemetry.counters == {
        "jobs_started": 5,
        "jobs_completed": 2,
        "jobs_failed": 2,
        "jobs_retried": 1,
        "jobs_returned": 0,
        "rate_limit_hits": worker.telemetry.counters["rate_limit_hits"],
        "stalled_recovered": 1,
        "stalled_failed": 1,
    }
    assert worker.telemetry.counters["rate_limit_hits"] >= 1

    finished = spans.get_finished_spans()
    jobs = [s for s in finished if s.name == f"process {q.name}"]
    assert len(jobs) == 5 and all(s.kind is SpanKind.CONSUMER for s in jobs)
    outcome = {
        (s.attributes["messaging.message.id"], s.attributes["bullpen.job.outcome"])
        for s in jobs
    }
    assert outcome == {
        (ok.id, "completed"),
        (retried.id, "retried"),
        (retried.id, "completed"),
        (doomed.id, "failed"),
        (orphan.id, "failed"),
    }
    failed = next(s for s in jobs if s.attributes["messaging.message.id"] == doomed.id)
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.events[0].name == "exception"
    assert all(s.attributes["messaging.destination.name"] == q.name for s in jobs)
    check = next(s for s in finished if s.name == f"stalled check {q.name}")
    assert check.attributes["bullpen.stalled.recovered"] == 1
    assert check.attributes["bullpen.stalled.failed"] == 1

    found = points(reader)
    jobs_by = by_outcome(found, "bullpen.worker.jobs")
    assert {k: p.value for k, p in jobs_by.items()} == {
        "started": 5,
        "completed": 2,
        "failed": 2,
        "retried": 1,
    }
    durations = by_outcome(found, "bullpen.worker.job.duration")
    assert durations["completed"].count == 2 and durations["failed"].count == 2
    assert found["bullpen.worker.rate_limit.hits"][0].value >= 1
    assert found["bullpen.worker.rate_limit.delay"][0].max <= 300
    stalled = by_outcome(found, "bullpen.worker.stalled_jobs")
    assert (stalled["recovered"].value, stalled["failed"].value) == (1, 1)
    assert found["bullpen.worker.stalled_check.duration"][0].count == 1
    assert found["bullpen.workers"][0].value == 0
    assert found["bullpen.worker.uptime"][0].count == 1


def test_disabled_telemetry_keeps_only_counters(redis_url: str, q: Queue) -> None:
    """Telemetry(enabled=False) records no span or metric, only counters."""
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    options = Telemetry(tracer_provider, MeterProvider([reader]), enabled=False)
    q.add("ok", {"n": 1})
    worker = Worker(q.name, flaky, connection=redis_url, telemetry=options)
    handle = WorkerThread(worker)
    handle.thread.start()
    try:
        wait_until(lambda: q.get_counts("completed")["completed"] == 1)
    finally:
        handle.stop()
    assert worker.telemetry.counters["jobs_completed"] == 1
    assert spans.get_finished_spans() == ()
    assert points(reader) == {}


def test_idle_global_providers_cost_no_spans(redis_url: str, q: Queue) -> None:
    """With the OpenTelemetry API but no SDK set up (the global providers
    record nothing), the worker settles at start to count only: it builds no
    no-op spans per job."""
    q.add("ok", {"n": 1})
    worker = Worker(q.name, flaky, connection=redis_url)
    handle = WorkerThread(worker)
    handle.thread.start()
    try:
        wait_until(lambda: q.get_counts("completed")["completed"] == 1)
    finally:
        handle.stop()
    assert worker.telemetry.counters["jobs_completed"] == 1
    assert worker.telemetry.otel is False


NO_OTEL = """
import importlib.abc, json, sys, threading

class NoOpenTelemetry(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ImportError("opentelemetry is not installed here")
        return None

sys.meta_path.insert(0, NoOpenTelemetry())
from queues import Queue, Worker
from queues.telemetry import otel_available

url, name = sys.argv[1], sys.argv[2]
q = Queue(name, url)
q.add("ok", {})
q.add("bad", {}, attempts=1)
worker = Worker(name, lambda job: 1 / (job.name == "ok"), connection=url)
worker.on("failed", lambda job, exc: worker.close())
timer = threading.Timer(10, worker.close)
timer.daemon = True
timer.start()
worker.run()
print(json.dumps({"otel": otel_available(), "counters": worker.telemetry.counters,
                  "loaded": sorted(m for m in sys.modules if "opentelemetry" in m)}))
"""


def test_without_opentelemetry_the_worker_counts_only(
    redis_url: str, qname: str
) -> None:
    """Where `opentelemetry` cannot be imported the worker runs as before and
    still counts (the telemetry is a no-op, not an error)."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(NO_OTEL), redis_url, qname],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=REPO_ROOT,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["otel"] is False and report["loaded"] == []
    assert report["counters"]["jobs_started"] == 2
    assert report["counters"]["jobs_completed"] == 1
    assert report["counters"]["jobs_failed"] == 1


def test_processor_spans_nest_under_the_job_span(redis_url: str, q: Queue) -> None:
    """Spans a processor starts (plain def on a thread, or async def) are
    children of its job's `process` span."""
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    tracer = tracer_provider.get_tracer("test")
    options = Telemetry(tracer_provider, MeterProvider())

    def sync_processor(job: Job) -> int:
        with tracer.start_as_current_span("inner sync"):
            return 1

    async def async_processor(job: Job) -> int:
        with tracer.start_as_current_span("inner async"):
            await asyncio.sleep(0)
            return 2

    first = q.add("sync", {})
    worker = Worker(q.name, sync_processor, connection=redis_url, telemetry=options)
    handle = WorkerThread(worker)
    handle.thread.start()
    try:
        wait_until(lambda: q.get_job_state(first.id) is JobState.COMPLETED)
    finally:
        handle.stop()

    async def run_async() -> None:
        worker = AsyncWorker(
            q.name, async_processor, connection=redis_url, telemetry=options
        )
        worker.on("completed", lambda job, result: worker.close())
        q.add("async", {})
        await asyncio.wait_for(worker.run(install_signals=False), 15)

    asyncio.run(run_async())
    finished = {s.name: s for s in spans.get_finished_spans()}
    jobs = [s for s in spans.get_finished_spans() if s.name == f"process {q.name}"]
    assert len(jobs) == 2
    for inner_name in ("inner sync", "inner async"):
        inner = finished[inner_name]
        assert inner.parent is not None, inner_name
        parent = [j for j in jobs if j.context.span_id == inner.parent.span_id]
        assert len(parent) == 1, inner_name
        assert parent[0].context.trace_id == inner.context.trace_id
