"""Prometheus metrics: one custom collector that reads Redis at scrape time.

Nothing is counted in the dashboard process; every scrape reads the queues in
a bounded number of pipelined round trips whatever the queue sizes (counts
are O(1) per state, lists are never walked), and the worker registry from the
process's fleet snapshot (at most BULLPEN_FLEET_MAX_AGE_S old while it can
be; its families are built once per snapshot):

Queues (label `queue` = `prefix:name`)
  bullpen_queue_jobs{queue,state}                    jobs per state (gauge)
  bullpen_queue_paused{queue}                        1 while paused
  bullpen_queue_workers{queue}                       connected workers (CLIENT LIST)
  bullpen_queue_completed_total / _failed_total      BullMQ's `metrics:*` counters,
                                                     present when workers collect them
  bullpen_queue_oldest_waiting_timestamp_seconds     when the next waiting job was
                                                     added (or became due)
  bullpen_job_wait_duration_seconds{queue}           gauge histograms over a SAMPLE:
  bullpen_job_run_duration_seconds{queue}            the most recent finished jobs
Workers (label `worker` = registry id, plus host, queue, gpu)
  bullpen_worker_state{...,state}                    1 for the current state
  bullpen_worker_heartbeat_timestamp_seconds
  bullpen_worker_restarts_total, bullpen_worker_jobs_total{...,outcome}
  bullpen_worker_slots, bullpen_worker_running_jobs
  bullpen_worker_attempts_total{...,outcome}         job attempts started, completed,
                                                     failed, retried (worker telemetry)
  bullpen_worker_rate_limit_hits_total               claims the rate limit stopped
  bullpen_worker_stalled_jobs_total{...,outcome}     jobs its stalled checks recovered,
                                                     and those that fail for stalling
GPUs (labels host, gpu = UUID, index, name, simulated)
  bullpen_gpu_memory_{total,used,committed,free,budget}_bytes
  bullpen_gpu_utilization_ratio, bullpen_gpu_temperature_celsius,
  bullpen_gpu_power_watts, bullpen_gpu_oom_total
Fleet (whole-fleet aggregates; dashboard/console/metrics_gpus.py)
  bullpen_fleet_gpus{state}, bullpen_fleet_workers{queue,state},
  bullpen_fleet_gpu_memory_{total,used,committed,budget}_bytes,
  bullpen_fleet_gpu_oom_total, bullpen_fleet_gpus_labelled
  Past BULLPEN_METRICS_TOP_GPUS GPUs, the worker, GPU and model families
  label that many GPUs (those an alert may be about first: down, OOMs,
  failed or restarted workers; then the fullest) and the workers on them,
  so that a scrape stays small; the fleet families count every GPU.
Models (labels gpu = UUID, model; at most 16 models a GPU, then "(other)";
dashboard/console/metrics_models.py)
  bullpen_model_loads_total, bullpen_model_evictions_total,
  bullpen_model_load_failures_total, bullpen_model_load_ooms_total,
  bullpen_model_load_seconds (histogram), bullpen_model_resident_bytes,
  bullpen_models_resident{gpu}
Groups (labels queue, group: the BULLPEN_METRICS_TOP_GROUPS largest backlogs
and "(other)"; dashboard/console/metrics_groups.py)
  bullpen_group_waiting, bullpen_group_active, and per queue bullpen_groups,
  bullpen_groups_paused, bullpen_groups_held
Redis (label `node`: the server, each primary of a cluster): memory used and
max, maxmemory policy, evicted keys, clients (dashboard/console/metrics_redis.py)
And bullpen_redis_up, bullpen_scrape_duration_seconds: these two describe the
scrape of the dashboard process that answered it; every other family is read
from Redis and is the same from every process (scrape one, never sum them).

About the duration histograms: Redis keeps no running histogram of job times,
so each scrape builds one from the newest finished jobs of each queue (up to
BULLPEN_METRICS_SAMPLE_JOBS completed and as many failed, fewer when there are
many queues: at most SAMPLE_BUDGET_JOBS per scrape). They are exposed as gauge
histograms (`_bucket` plus `_gcount`/`_gsum`): buckets may go down between
scrapes, so use them without rate(), e.g.
`histogram_quantile(0.95, sum by (le) (bullpen_job_run_duration_seconds_bucket))`.
Wait = processedOn - (timestamp + delay); run = finishedOn - processedOn.
"""

from __future__ import annotations

import logging
import time
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import redis
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeHistogramMetricFamily,
    GaugeMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from dashboard.console import metrics_gputime, reads
from dashboard.shared import conf
from dashboard.shared.discovery import QueueRef, known_queues
from gpu_workers.fleet_snapshot import FleetSnapshot
from queues import codec, ops
from queues.clients import connection_name
from queues.drive import cmd, cmds, gather
from queues.keys import QueueKeys
from queues.names import qualified_name
from queues.ops import DEFAULT_STATES

from .metrics_gpus import fleet_families, gpu_families, labelled
from .metrics_groups import group_families
from .metrics_models import model_families
from .metrics_redis import redis_families
from .reads.overview import worker_census

log = logging.getLogger(__name__)

#: Upper bounds (seconds) of the duration histograms' buckets.
#: (Each bucket is one line per queue and histogram: few, wide buckets keep a
#: scrape of 100 queues small.)
BUCKETS_S = (0.5, 2, 10, 60, 300, 1800)
#: Finished jobs sampled per scrape over all queues (bounds the scrape's cost).
SAMPLE_BUDGET_JOBS = 1_000
#: Worker states reported as 0/1 series (those a heartbeat may carry).
WORKER_STATES = ("starting", "idle", "busy", "draining", "failed")
#: Per-worker job counters a heartbeat carries.
WORKER_OUTCOMES = ("processed", "failed", "oom", "cancelled", "too_big")
#: Worker telemetry counters a heartbeat carries (queues.telemetry.COUNTERS),
#: by family and outcome label.
TELEMETRY = {
    "attempts": {
        "started": "jobs_started",
        "completed": "jobs_completed",
        "failed": "jobs_failed",
        "retried": "jobs_retried",
        "returned": "jobs_returned",
    },
    "stalled": {"recovered": "stalled_recovered", "failed": "stalled_failed"},
}


_FIELDS = ("timestamp", "delay", "processedOn", "finishedOn")


def _newest(keys: QueueKeys, key: str, sample: int) -> ops.Op[list[list[Any]]]:
    """The timestamps of the newest `sample` jobs of a finished set, newest
    first: their ids, then one `ops.job_fields` each, O(log N + sample), where
    a member naming no job hash (`id`, another client's) reads as a gone job.
    (Not one SORT ... GET: a Redis Cluster refuses SORT's GET patterns.)"""
    ids = yield ops.Cmd(("ZREVRANGE", key, 0, sample - 1))
    if not ids:
        return []
    rows: list[list[Any]] = yield [ops.job_fields(keys, i, _FIELDS) for i in ids]
    return rows


def _queue_op(keys: QueueKeys, sample: int) -> ops.Op:
    """Everything the collector reads about one queue, in two steps."""
    counts, paused, oldest, totals, *recent = yield from gather(
        [
            ops.get_counts(keys, DEFAULT_STATES),
            cmd("HEXISTS", keys.meta, "paused"),
            ops.oldest_waiting(keys),
            cmds(
                [
                    ("HGET", keys.metrics("completed"), "count"),
                    ("HGET", keys.metrics("failed"), "count"),
                ]
            ),
            _newest(keys, keys.completed, sample),
            _newest(keys, keys.failed, sample),
        ]
    )
    waits, runs = [], []
    for rows in recent:
        for stamp, delay, started, finished in rows:
            # Text another client wrote where a number belongs skips the job.
            created, start_ms = codec.to_int(stamp), codec.to_int(started)
            if created is None or start_ms is None:
                continue
            wait_ms = start_ms - created - (codec.to_int(delay, 0) or 0)
            waits.append(max(wait_ms, 0) / 1000)
            end_ms = codec.to_int(finished)
            if end_ms is not None:
                runs.append(max(end_ms - start_ms, 0) / 1000)
    return {
        "counts": counts,
        "paused": bool(paused),
        "oldest_ms": oldest,
        "completed_total": totals[0],
        "failed_total": totals[1],
        "waits": waits,
        "runs": runs,
    }


def _histogram(values: Sequence[float]) -> tuple[list[tuple[str, float]], float]:
    ordered = sorted(values)
    buckets = [(str(b), float(bisect_right(ordered, b))) for b in BUCKETS_S]
    buckets.append(("+Inf", float(len(ordered))))
    return buckets, float(sum(ordered))


#: The fleet families of the last snapshot scraped (the snapshot, families,
#: and their text by the encoder that wrote it).
_fleet_built: tuple[FleetSnapshot, list[Metric], dict[Any, bytes]] | None = None


class _Families:
    """Families as prometheus_client's encoders take them (a registry)."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self.families)


class BullpenCollector(Collector):
    """Reads queue, worker and GPU state from Redis on every collect()."""

    def __init__(self, sample_jobs: int | None = None) -> None:
        self.sample_jobs = sample_jobs

    def collect(self) -> Iterator[Metric]:
        """One scrape: every family, or only bullpen_redis_up 0 when Redis fails."""
        for part in self._scrape():
            yield from part[1]

    def exposition(self, encoder: Callable[[Any], bytes]) -> bytes:
        """One scrape as `encoder` (prometheus_client's) writes it, the
        fleet's families written once per snapshot and encoder: at 4,096
        GPUs they are most of a scrape's megabyte."""
        parts = []
        for texts, families in self._scrape():
            if texts is None:
                parts.append(encoder(_Families(families)))
                continue
            text = texts.get(encoder)
            if text is None:
                text = texts[encoder] = encoder(_Families(families))
            parts.append(text)
        # OpenMetrics ends with "# EOF": once, at the end.
        eof = b"# EOF\n"
        return b"".join(p.removesuffix(eof) for p in parts) + (
            eof if parts and parts[-1].endswith(eof) else b""
        )

    def _scrape(self) -> Iterator[tuple[dict[Any, bytes] | None, list[Metric]]]:
        """The scrape's families in parts: (their texts by encoder, the
        families) for the fleet's, (None, families) for the rest."""
        started = time.perf_counter()
        up = GaugeMetricFamily(
            "bullpen_redis_up",
            "1 when Redis answered this scrape (from this dashboard process)",
        )
        try:
            queues = list(self._queue_families())
            _, fleet, texts = self._fleet_families()
            rest = [*redis_families(), *metrics_gputime.gputime_families()]
        except redis.RedisError as exc:
            log.warning("metrics scrape failed: %r", exc)
            up.add_metric([], 0)
            yield None, [up]
            return
        up.add_metric([], 1)
        yield None, [up, *queues]
        yield texts, fleet
        spent = GaugeMetricFamily(
            "bullpen_scrape_duration_seconds",
            "Time this scrape spent reading Redis (this dashboard process's own)",
        )
        spent.add_metric([], time.perf_counter() - started)
        yield None, [*rest, spent]

    # --- queues -----------------------------------------------------------------------
    def _sample_size(self, queues: int) -> int:
        wanted = self.sample_jobs or conf.get().metrics_sample_jobs
        return max(1, min(wanted, SAMPLE_BUDGET_JOBS // max(2 * queues, 1)))

    def _queue_families(self) -> Iterable[Metric]:
        refs: list[QueueRef] = known_queues()
        sample = self._sample_size(len(refs))
        found = reads.run(
            gather([_queue_op(QueueKeys(r.name, r.prefix), sample) for r in refs])
        )
        jobs = GaugeMetricFamily(
            "bullpen_queue_jobs", "Jobs in each state", labels=["queue", "state"]
        )
        paused = GaugeMetricFamily(
            "bullpen_queue_paused", "1 while the queue is paused", labels=["queue"]
        )
        workers = GaugeMetricFamily(
            "bullpen_queue_workers",
            "Connected BullMQ workers of the queue (Bullpen's and Node's)",
            labels=["queue"],
        )
        census = worker_census()
        completed = CounterMetricFamily(
            "bullpen_queue_completed",
            "Jobs completed (BullMQ metrics counter, when workers collect it)",
            labels=["queue"],
        )
        failed = CounterMetricFamily(
            "bullpen_queue_failed",
            "Jobs failed (BullMQ metrics counter, when workers collect it)",
            labels=["queue"],
        )
        oldest = GaugeMetricFamily(
            "bullpen_queue_oldest_waiting_timestamp_seconds",
            "Unix time the next waiting job was added (or became due)",
            labels=["queue"],
        )
        wait = GaugeHistogramMetricFamily(
            "bullpen_job_wait_duration_seconds",
            f"Time from due to start of the newest finished jobs (sample of up to "
            f"{sample} completed and {sample} failed per queue)",
            labels=["queue"],
        )
        run = GaugeHistogramMetricFamily(
            "bullpen_job_run_duration_seconds",
            f"Time from start to finish of the newest finished jobs (sample of up "
            f"to {sample} completed and {sample} failed per queue)",
            labels=["queue"],
        )
        for ref, q in zip(refs, found):
            label = ref.key
            for state, n in q["counts"].items():
                jobs.add_metric([label, state], n)
            paused.add_metric([label], 1 if q["paused"] else 0)
            workers.add_metric(
                [label], census.get(connection_name(ref.prefix, ref.name), 0)
            )
            if q["completed_total"] is not None:
                completed.add_metric([label], float(q["completed_total"]))
            if q["failed_total"] is not None:
                failed.add_metric([label], float(q["failed_total"]))
            if q["oldest_ms"] is not None:
                oldest.add_metric([label], q["oldest_ms"] / 1000)
            buckets, total = _histogram(q["waits"])
            wait.add_metric([label], buckets, total)
            buckets, total = _histogram(q["runs"])
            run.add_metric([label], buckets, total)
        families = [jobs, paused, workers, completed, failed, oldest, wait, run]
        return [*families, *group_families(refs)]

    # --- workers and GPUs -------------------------------------------------------------
    def _fleet_families(
        self,
    ) -> tuple[FleetSnapshot, list[Metric], dict[Any, bytes]]:
        # The process's fleet snapshot (at most BULLPEN_FLEET_MAX_AGE_S old
        # while it can be): its families are built once per snapshot and
        # reused by the scrapes in between.
        snap = reads.fleet_snapshot()
        global _fleet_built
        built = _fleet_built
        if built is None or built[0] is not snap:
            built = _fleet_built = (snap, list(self._build_fleet(snap)), {})
        return built

    def _build_fleet(self, snap: FleetSnapshot) -> Iterable[Metric]:
        gpus, workers = labelled(snap, conf.get().metrics_top_gpus)
        yield from fleet_families(snap, len(gpus))
        wl = ["worker", "host", "queue", "gpu"]
        state = GaugeMetricFamily(
            "bullpen_worker_state",
            "1 for the worker's current state",
            labels=[*wl, "state"],
        )
        beat = GaugeMetricFamily(
            "bullpen_worker_heartbeat_timestamp_seconds",
            "Unix time of the worker's last heartbeat",
            labels=wl,
        )
        restarts = CounterMetricFamily(
            "bullpen_worker_restarts", "Restarts of the worker process", labels=wl
        )
        outcomes = CounterMetricFamily(
            "bullpen_worker_jobs",
            "Jobs the worker process handled since it started, by outcome",
            labels=[*wl, "outcome"],
        )
        slots = GaugeMetricFamily(
            "bullpen_worker_slots", "Jobs the worker may hold at once", labels=wl
        )
        running = GaugeMetricFamily(
            "bullpen_worker_running_jobs", "Jobs the worker holds now", labels=wl
        )
        attempts = CounterMetricFamily(
            "bullpen_worker_attempts",
            "Job attempts the worker process started and ended, by outcome",
            labels=[*wl, "outcome"],
        )
        limit_hits = CounterMetricFamily(
            "bullpen_worker_rate_limit_hits",
            "Claims of the worker process the queue's rate limit stopped",
            labels=wl,
        )
        stalled = CounterMetricFamily(
            "bullpen_worker_stalled_jobs",
            "Jobs the worker's stalled checks moved back to wait (recovered), "
            "and those of them that fail for stalling too often (failed)",
            labels=[*wl, "outcome"],
        )
        for w in workers:
            labels = [
                str(w.get("id", "")),
                str(w.get("host", "")),
                qualified_name(str(w.get("prefix", "bull")), str(w.get("queue", ""))),
                str((w.get("gpu") or {}).get("uuid", "")),
            ]
            current = w.get("state")
            for s in WORKER_STATES:
                state.add_metric([*labels, s], 1 if s == current else 0)
            if isinstance(w.get("seen_ms"), (int, float)):  # last seen
                beat.add_metric(labels, w["seen_ms"] / 1000)
            restarts.add_metric(labels, float(w.get("restarts") or 0))
            counters = w.get("counters") or {}
            for outcome in WORKER_OUTCOMES:
                if outcome in counters:
                    outcomes.add_metric([*labels, outcome], float(counters[outcome]))
            slots.add_metric(labels, float(w.get("slots") or 0))
            running.add_metric(labels, float(len(w.get("running") or [])))
            telemetry = w.get("telemetry")
            if isinstance(telemetry, dict):
                for family, names in (
                    (attempts, TELEMETRY["attempts"]),
                    (stalled, TELEMETRY["stalled"]),
                ):
                    for outcome, key in names.items():
                        count = float(telemetry.get(key) or 0)
                        family.add_metric([*labels, outcome], count)
                hits = float(telemetry.get("rate_limit_hits") or 0)
                limit_hits.add_metric(labels, hits)
        yield from (state, beat, restarts, outcomes, slots, running)
        yield from (attempts, limit_hits, stalled)
        yield from gpu_families(gpus)
        yield from model_families(workers)
