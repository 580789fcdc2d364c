"""In-process telemetry of a worker: counters always, OpenTelemetry spans and
metrics when the `opentelemetry` package is installed (a no-op otherwise).

What a worker records (the events BullMQ's Elixir port and `bullmq-otel`
report):

- job attempts: started, completed, failed, retried, with their duration
- rate-limit hits, with the delay the limiter imposed
- worker start and stop, with its uptime
- stalled checks: jobs recovered (moved back to wait) and jobs that will
  fail for stalling too often, with the check's duration

OpenTelemetry: a `process {queue}` span (kind CONSUMER) per job attempt,
current in the task and thread that run the processor (its spans nest), a
`stalled check {queue}` span per check that moved jobs, and the instruments
below, on the providers of `Telemetry` or else the global ones. Which
providers are live is settled when the worker starts: with none (the API
without an SDK set up), a job costs only the counters, not no-op spans.

- `bullpen.worker.jobs` (counter, attribute `outcome`: started, completed,
  failed, retried) and `bullpen.worker.job.duration` (histogram, s)
- `bullpen.worker.rate_limit.hits` (counter), `bullpen.worker.rate_limit.delay`
  (histogram, ms)
- `bullpen.worker.stalled_jobs` (counter, `outcome`: recovered, failed),
  `bullpen.worker.stalled_check.duration` (histogram, s)
- `bullpen.workers` (up-down counter of running workers),
  `bullpen.worker.uptime` (histogram, s, recorded at stop)

Every instrument carries `messaging.destination.name` (the queue).
"""

from __future__ import annotations

import contextvars
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

try:
    from opentelemetry import context as otel_context
    from opentelemetry import metrics as otel_metrics
    from opentelemetry import trace as otel_trace
except ImportError:  # the optional dependency is absent: counters only
    otel_context = otel_metrics = otel_trace = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from .job import Job

#: Provider classes that record nothing (the API's defaults until an SDK is set).
_IDLE_PROVIDERS = frozenset(
    {
        "ProxyTracerProvider",
        "NoOpTracerProvider",
        "_ProxyMeterProvider",
        "NoOpMeterProvider",
    }
)
#: The counters every worker keeps (and GPU workers publish in heartbeats).
COUNTERS = (
    "jobs_started",
    "jobs_completed",
    "jobs_failed",
    "jobs_retried",
    "jobs_returned",
    "rate_limit_hits",
    "stalled_recovered",
    "stalled_failed",
)
SCOPE = "bullpen.queues"


def otel_available() -> bool:
    """Whether the `opentelemetry` API package can be imported."""
    return otel_trace is not None


def _live(provider: Any) -> bool:
    return type(provider).__name__ not in _IDLE_PROVIDERS


@dataclass(frozen=True)
class Telemetry:
    """How a worker reports telemetry: OpenTelemetry providers (None: the
    global ones), or `enabled=False` for counters only."""

    tracer_provider: Any = None
    meter_provider: Any = None
    enabled: bool = True


class WorkerTelemetry:
    """One worker's counters and, with OpenTelemetry, its spans and metrics."""

    def __init__(
        self, queue: str, worker_name: str | None, options: Telemetry | None = None
    ) -> None:
        options = options or Telemetry()
        self.queue = queue
        self.counters: dict[str, int] = dict.fromkeys(COUNTERS, 0)
        self._attrs = {"messaging.destination.name": queue}
        self._span_attrs = {
            "messaging.system": "bullmq",
            "messaging.operation.type": "process",
            **self._attrs,
        }
        if worker_name:
            self._span_attrs["bullmq.worker.name"] = worker_name
        self._running: dict[tuple[str, str | None], tuple[Any, float]] = {}
        self._started_at = 0.0
        self._options = options
        #: Whether spans and metrics are recorded (settled by worker_started).
        self.otel = False

    def _setup(self) -> None:
        """Record through OpenTelemetry when it is there and a provider is live."""
        options = self._options
        if not (options.enabled and otel_available()):
            return
        tracer_provider = options.tracer_provider or otel_trace.get_tracer_provider()
        meter_provider = options.meter_provider or otel_metrics.get_meter_provider()
        self.otel = _live(tracer_provider) or _live(meter_provider)
        if not self.otel:
            return
        self._tracer = otel_trace.get_tracer(SCOPE, tracer_provider=tracer_provider)
        meter = otel_metrics.get_meter(SCOPE, meter_provider=meter_provider)
        self._jobs = meter.create_counter(
            "bullpen.worker.jobs", "{job}", "Job attempts by outcome"
        )
        self._job_duration = meter.create_histogram(
            "bullpen.worker.job.duration", "s", "Run time of job attempts"
        )
        self._limit_hits = meter.create_counter(
            "bullpen.worker.rate_limit.hits", "{hit}", "Claims the rate limit stopped"
        )
        self._limit_delay = meter.create_histogram(
            "bullpen.worker.rate_limit.delay", "ms", "Waits the rate limit imposed"
        )
        self._stalled = meter.create_counter(
            "bullpen.worker.stalled_jobs", "{job}", "Jobs found stalled, by outcome"
        )
        self._check_duration = meter.create_histogram(
            "bullpen.worker.stalled_check.duration", "s", "Checks that moved jobs"
        )
        self._workers = meter.create_up_down_counter(
            "bullpen.workers", "{worker}", "Running workers"
        )
        self._uptime = meter.create_histogram(
            "bullpen.worker.uptime", "s", "How long stopped workers ran"
        )

    # --- the worker -------------------------------------------------------
    def worker_started(self) -> None:
        """The worker's run() began: settle the providers, count it."""
        self._started_at = time.monotonic()
        self._setup()
        if self.otel:
            self._workers.add(1, self._attrs)

    def worker_stopped(self) -> None:
        """run() is returning: end what is still open, record the uptime."""
        for key in list(self._running):
            self._end(key, "abandoned", "the worker stopped before the job ended")
        if self.otel:
            self._workers.add(-1, self._attrs)
            self._uptime.record(time.monotonic() - self._started_at, self._attrs)

    # --- jobs -------------------------------------------------------------
    def job_started(self, job: Job) -> None:
        """An attempt of `job` began."""
        self.counters["jobs_started"] += 1
        if not self.otel:
            return
        self._jobs.add(1, {**self._attrs, "outcome": "started"})
        span = self._tracer.start_span(
            f"process {self.queue}",
            kind=otel_trace.SpanKind.CONSUMER,
            attributes={
                **self._span_attrs,
                "messaging.message.id": job.id,
                "bullmq.job.name": job.name,
                "bullmq.job.attempts_made": job.attempts_made,
            },
        )
        self._running[(job.id, job.token)] = (span, time.monotonic())

    def job_context(self, job: Job) -> contextvars.Context | None:
        """A context in which the job's span is current, for the task (and
        thread) that runs it, so spans its processor starts nest under it;
        None (the caller's own) when nothing is traced."""
        entry = self._running.get((job.id, job.token))
        if entry is None or entry[0] is None:
            return None
        context = contextvars.copy_context()
        context.run(otel_context.attach, otel_trace.set_span_in_context(entry[0]))
        return context

    def job_completed(self, job: Job) -> None:
        """The attempt succeeded."""
        self.counters["jobs_completed"] += 1
        self._end((job.id, job.token), "completed")

    def job_failed(self, job: Job, error: BaseException) -> None:
        """The attempt failed for good."""
        self.counters["jobs_failed"] += 1
        self._end((job.id, job.token), "failed", error=error)

    def job_retried(self, job: Job, error: BaseException, delay_ms: int) -> None:
        """The attempt failed; the job runs again after `delay_ms`."""
        self.counters["jobs_retried"] += 1
        self._end((job.id, job.token), "retried", error=error, delay_ms=delay_ms)

    def job_returned(self, job: Job, reason: BaseException) -> None:
        """The attempt gave its job back to wait (MoveToWait), not counted."""
        self.counters["jobs_returned"] += 1
        self._end((job.id, job.token), "returned", reason=str(reason) or "returned")

    def _end(
        self,
        key: tuple[str, str | None],
        outcome: str,
        reason: str = "",
        error: BaseException | None = None,
        delay_ms: int | None = None,
    ) -> None:
        span, started = self._running.pop(key, (None, 0.0))
        if not self.otel or not started:
            return
        attrs = {**self._attrs, "outcome": outcome}
        self._jobs.add(1, attrs)
        self._job_duration.record(time.monotonic() - started, attrs)
        if span is None:
            return
        span.set_attribute("bullpen.job.outcome", outcome)
        if delay_ms is not None:
            span.set_attribute("bullpen.job.retry_delay_ms", delay_ms)
        if error is not None:
            span.record_exception(error)
        if error is not None or reason:
            description = reason or f"{type(error).__name__}: {error}"
            span.set_status(otel_trace.StatusCode.ERROR, description)
        span.end()

    # --- the queue --------------------------------------------------------
    def rate_limited(self, delay_ms: int) -> None:
        """A claim found the rate limit reached; claims wait `delay_ms`."""
        self.counters["rate_limit_hits"] += 1
        if self.otel:
            self._limit_hits.add(1, self._attrs)
            self._limit_delay.record(delay_ms, self._attrs)

    def stalled_check(self, recovered: list[str], failed: int, started: float) -> None:
        """A stalled check (begun at monotonic `started`) moved `recovered`
        back to wait, `failed` of them to fail for stalling too often."""
        self.counters["stalled_recovered"] += len(recovered)
        self.counters["stalled_failed"] += failed
        if not self.otel or not recovered:
            return
        now = time.monotonic()
        self._stalled.add(len(recovered), {**self._attrs, "outcome": "recovered"})
        if failed:
            self._stalled.add(failed, {**self._attrs, "outcome": "failed"})
        self._check_duration.record(now - started, self._attrs)
        end_ns = time.time_ns()
        span = self._tracer.start_span(
            f"stalled check {self.queue}",
            attributes={
                **self._span_attrs,
                "bullpen.stalled.recovered": len(recovered),
                "bullpen.stalled.failed": failed,
                "bullpen.stalled.job_ids": recovered[:100],
            },
            start_time=end_ns - int((now - started) * 1e9),
        )
        span.end(end_time=end_ns)
