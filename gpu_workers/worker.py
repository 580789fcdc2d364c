"""`GpuWorker`: a queue worker that owns one GPU and admits jobs by VRAM.

It holds a queues `AsyncWorker` whose processor runs the `@handler` of each
job, and whose claim policy is its `VramAdmission` (admission.py): one job
at a time, only with a free slot and some uncommitted budget, and none while
a claimed job still waits for budget (it holds its slot until running jobs
release enough). A job larger than the whole budget fails at once
(JobTooLarge, unrecoverable).

A job whose handler names a model (models.py) commits its working memory
and runs once its model is resident: residency.py loads it (or finds it
loaded), evicting idle models by least recent use; model_upkeep.py reports
loads and evictions and keeps pins, warm pools and measured weights fresh.

The heartbeat, control and peak loops are in upkeep.py; telling an OOM
apart and checking CUDA after one, in oom.py.

Each job's declared need and measured peak are written (job_record.py),
before the job finishes, to the hash `bullpen:job:{prefix}:{queue}:{id}`
(see keys.py and Fleet.job_vram) and as a line of the job's log:
declared_bytes, peak_bytes and peak_source (handler | simulated | nvml-
process), process_peak_bytes (NVML's reading of this whole process by pid
while the job ran; an upper bound when jobs overlap), gpu, host, worker,
outcome, timestamps. The outcome is the processor's; when Redis then refuses
the finish (the lock was lost) it becomes "lost (finish refused, code N)"
with the attempt record (queues/attempts.py), to which the worker adds its
GPU, host and VRAM. Each attempt that ran on the GPU is also counted by GPU-
time accounting (gputime.py: GPU-seconds and VRAM-GiB-seconds per queue, job
name, tenant).

A CUDA OOM becomes the retryable reason "CUDA out of memory", counts
against the GPU, empties the cache and runs a tiny self-check; if CUDA is
broken the process closes quickly and exits with EXIT_CUDA_BROKEN so the
supervisor restarts it (the stalled check recovers what it left).
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from queues import AsyncWorker, AttemptHistory, Job, MetricsOptions, MoveToWait
from queues.connection import async_from_url
from queues.keys import QueueKeys
from queues.names import qualified_name

from . import defaults
from .admission import PlacedAdmission, QueueClaims, VramAdmission
from .config import WorkerSpec
from .device import open_device
from .exceptions import CudaOutOfMemory, JobCancelled, JobTooLarge
from .gputime import GpuTimeRecorder, Retention
from .handlers import REGISTRY, HandlerRegistry, JobContext, JobMeter
from .job_record import JobRecorder
from .keys import BullpenKeys
from .model_upkeep import ModelUpkeep
from .oom import cuda_self_check, is_cuda_oom
from .placement import Placement
from .probe import GpuProbe
from .residency import Residency
from .resident import Resident
from .shared_gpu import SharedGpu
from .units import format_bytes
from .upkeep import WorkerUpkeep

log = logging.getLogger("gpu_workers.worker")


class GpuWorker:
    """A worker process's queue worker pinned to one GPU with a VRAM budget."""

    def __init__(
        self,
        spec: WorkerSpec,
        probe: GpuProbe,
        registry: HandlerRegistry = REGISTRY,
        shared: SharedGpu | None = None,
    ) -> None:
        self.spec = spec
        self.probe = probe
        self.registry = registry
        #: What it shares with the other queues' workers of its GPU process.
        self.shared = shared
        if shared is None:
            self.device = open_device(probe, spec.gpu_uuid, spec.context_bytes)
            self.admission = VramAdmission(spec.budget_bytes, spec.slots, spec.gpu_uuid)
            self.claims: VramAdmission | QueueClaims = self.admission
        else:
            self.device = shared.device
            self.admission = shared.admission
            self.claims = shared.admission.view(spec.slots)
        self.bkeys = BullpenKeys(spec.namespace)
        #: The models resident on the GPU (residency.py): its process's.
        self.residency = (
            shared.residency
            if shared is not None
            else Residency(self.admission, self.device, probe, registry.models)
        )
        # Bullpen's own keys; decode_responses, so replies are str.
        self._bp: Any = async_from_url(spec.redis_url, decode_responses=True)
        #: Claim-time placement (placement.py), where handlers name models.
        self.placement: Placement | None = None
        policy: Any = self.claims
        if spec.placement and registry.uses_models():
            self.placement = Placement(
                self._bp,
                QueueKeys(spec.queue, spec.prefix),
                self.bkeys,
                spec.gpu_uuid,
                self.residency,
                registry.model_for,
                spec.placement_age_bound_s,
                spec.placement_cold_hold_s,
                spec.placement_scan,
                queue_key=qualified_name(spec.prefix, spec.queue),
            )
            policy = PlacedAdmission(self.claims, self.placement.before_claim)
        self.worker = AsyncWorker(
            spec.queue,
            self._process_job,
            connection=spec.redis_url,
            prefix=spec.prefix,
            concurrency=spec.max_slots,
            lock_duration=spec.lock_duration_ms,
            stalled_interval=spec.stalled_interval_ms,
            max_stalled_count=spec.max_stalled_count,
            worker_name=f"{spec.host}.{spec.queue}.gpu{self.device.index}",
            close_timeout=spec.drain_timeout_s,
            drain_delay=defaults.WORKER_DRAIN_DELAY_S,
            metrics=(
                MetricsOptions(spec.metrics_data_points)
                if spec.metrics_data_points
                else None
            ),
            attempt_history=AttemptHistory(namespace=spec.namespace),
            claim_policy=policy,
        )
        if isinstance(self.claims, QueueClaims):
            self.claims.claimed = lambda: len(self.worker.running_jobs)
            if self.placement is not None:
                # Open for this queue only with a slot of its own free; jobs
                # being finished (their meter gone) no longer hold one.
                claims = self.claims
                self.placement.has_room = lambda: len(self.meters) < claims.slots
        self.worker.on("closing", self._draining)
        if self.worker.reports.attempts is not None:
            self.worker.reports.attempts.on_lost = self._correct_outcome
        #: The running jobs' meters, by job id.
        self.meters: dict[str, JobMeter] = {}
        self.counters = {
            "processed": 0,
            "failed": 0,
            "oom": 0,
            "cancelled": 0,
            "too_big": 0,
        }
        self.exit_code = 0
        #: "starting" until run() has sent the first heartbeat, then "running".
        self._state = "starting"
        self._pool = ThreadPoolExecutor(spec.max_slots, thread_name_prefix="handler")
        self.gpu_time = GpuTimeRecorder(
            self._bp,
            self.bkeys,
            Retention(
                spec.gpu_time_hours_kept,
                spec.gpu_time_days_kept,
                spec.gpu_time_max_keys,
            ),
        )
        self.recorder = JobRecorder(
            self.worker,
            spec,
            self.device,
            self.admission,
            self.bkeys,
            self._bp,
            self.gpu_time,
        )
        #: The resident models' reports, refreshes and warm/open publishing
        #: (its process's, where queues share the GPU).
        if shared is not None:
            self.models = shared.models
        else:
            self.models = ModelUpkeep(
                self.residency,
                self._bp,
                self.bkeys,
                gpu=spec.gpu_uuid,
                host=spec.host,
                worker_id=spec.worker_id,
                queue=spec.queue,
                prefix=spec.prefix,
                context_bytes=spec.context_bytes,
                gpu_time=self.gpu_time,
                failed=self.worker.background.failed,
                waiting=lambda: any(not m.admitted for m in self.meters.values()),
                ttl_s=spec.heartbeat_ttl_s,
            )
        if self.placement is not None:
            self.models.placements.append(self.placement)
        if shared is None:  # (a GPU process recycles all its queues' workers)
            self.models.on_stuck = self.recycle
        self.upkeep = WorkerUpkeep(
            self.worker,
            spec,
            probe,
            self.device,
            self.admission,
            self.bkeys,
            self._bp,
            self.meters,
            self.counters,
            lambda: self.state,
            self.models,
            self.claims,
            shared.process if shared is not None else None,
        )

    @property
    def name(self) -> str:
        """The queue it works."""
        return self.spec.queue

    @property
    def closing(self) -> bool:
        """Whether it drains (close() was called)."""
        return self.worker.closing

    @property
    def state(self) -> str:
        """starting | idle | busy | draining."""
        if self.closing:
            return "draining"
        if self._state == "starting":
            return "starting"
        return "busy" if self.meters else "idle"

    def close(self, force: bool = False) -> None:
        """Drain: stop claiming; running jobs finish (up to drain_timeout_s;
        with `force`, not at all: the stalled check recovers them)."""
        self.worker.close(force)

    async def recycle(self, lost_bytes: int) -> None:
        """VRAM this process could not give back keeps its claimed jobs out,
        and only a new process (a new CUDA context) gets it back: give the
        jobs waiting for VRAM back to the front of the line, drain, and exit
        with EXIT_RECYCLE, which the supervisor restarts at once."""
        if self.closing:
            return
        waiting = [m for m in self.meters.values() if not m.admitted]
        log.error(
            "worker %s: %s of VRAM this process could not give back keeps %d "
            "claimed job(s) out on GPU %s; giving them back and restarting "
            "the process to free it",
            self.spec.worker_id,
            format_bytes(lost_bytes),
            len(waiting),
            self.device.uuid,
        )
        self.exit_code = defaults.EXIT_RECYCLE
        self.close()
        for meter in waiting:  # (given back, not cancelled: exit_code says so)
            meter.cancel.set()
        await self.admission.poke()

    def _draining(self) -> None:
        log.info("worker %s: draining", self.spec.worker_id)

    def heartbeat_record(self) -> dict[str, Any]:
        """What this worker publishes every heartbeat."""
        return self.upkeep.heartbeat_record()

    # --- running ----------------------------------------------------------------------
    async def run(self, install_signals: bool = True) -> None:
        """Process jobs, heartbeat and watch cancel flags until closed."""
        await self.upkeep.start()
        self._state = "running"
        try:
            await self.worker.run(install_signals)
        finally:
            await self.upkeep.stop()
            self._pool.shutdown(wait=False, cancel_futures=True)
            if self.shared is None:  # a shared one closes with its process
                self.residency.close()
            if self.placement is not None:
                await self.placement.withdraw()
            await self.upkeep.unpublish()
            await self._bp.aclose()

    async def _process_job(self, job: Job) -> Any:
        meter = JobMeter(job.id, job.name)
        self.meters[job.id] = meter
        self.upkeep.beat_soon()
        loop = asyncio.get_running_loop()
        ctx = JobContext(job, self.device, meter, loop)
        admitted = False
        outcome = "failed"
        key = self.claims.key(job.id)  # unique among the process's queues
        try:
            if await self._cancel_requested(job.id):
                meter.cancel.set()
                raise JobCancelled()
            if self.exit_code == defaults.EXIT_RECYCLE:
                # (claimed by a claim already in flight when it recycled)
                raise MoveToWait("its GPU process recycles to free VRAM")
            entry = self.registry.get(job.name)
            meter.model = self.registry.model_of(entry, job.data)
            meter.declared_bytes = entry.declared_bytes(job.data)
            try:
                admitted = await self._admit(key, meter, ctx)
            except JobTooLarge:
                self.counters["too_big"] += 1
                raise
            if not admitted:
                if self.exit_code == defaults.EXIT_RECYCLE:
                    raise MoveToWait("its GPU process recycles to free VRAM")
                raise JobCancelled()
            meter.admitted = True
            self.upkeep.beat_soon()
            await self.models.publish_if_changed()
            self.upkeep.sample_peaks()
            meter.admitted_us = time.time_ns() // 1000
            meter.started_ms = meter.admitted_us // 1000
            try:
                if entry.is_async:
                    result = await entry.fn(ctx)
                else:
                    result = await loop.run_in_executor(self._pool, entry.fn, ctx)
            except Exception as exc:
                if is_cuda_oom(exc):
                    await self._on_oom(job, exc)
                    raise CudaOutOfMemory() from exc
                if meter.cancel.is_set():
                    raise JobCancelled() from exc
                raise
            if meter.cancel.is_set():
                raise JobCancelled()
            outcome = "completed"
            self.counters["processed"] += 1
            return result
        except JobCancelled:
            outcome = "cancelled"
            self.counters["cancelled"] += 1
            raise
        except MoveToWait:
            outcome = "returned"
            raise
        except BaseException:
            self.counters["failed"] += 1
            raise
        finally:
            if admitted:
                self.upkeep.sample_peaks()
            if meter.sim_held_bytes:
                ctx.sim_free()
            if meter.model is not None:
                await self.residency.leave(key, meter.model)
            await self.admission.release(key)  # no-op unless committed
            if admitted:
                meter.released_us = time.time_ns() // 1000
                if meter.model is not None and meter.admitted_us is not None:
                    seconds = (meter.released_us - meter.admitted_us) / 1e6
                    await self.models.job_done(meter.model, seconds)
            self.meters.pop(job.id, None)
            self.upkeep.beat_soon()
            await self.models.publish_if_changed()
            await self.recorder.record(job, meter, outcome)

    async def _admit(self, key: str, meter: JobMeter, ctx: JobContext) -> bool:
        """Wait for VRAM (with a model: for it to be resident too); False:
        cancelled first. A job whose model's load failed raises its error.
        Where models may be resident, every job goes through the residency,
        so idle models are evicted for a job without one too."""
        if not self.registry.uses_models():
            return await self.admission.admit(
                key, meter.declared_bytes, abort=meter.cancel.is_set
            )
        resident = await self.residency.admit(
            key, meter.model, meter.declared_bytes, abort=meter.cancel.is_set
        )
        if resident is None:
            return False
        if isinstance(resident, Resident):
            ctx.model = resident.obj
        return True

    async def _cancel_requested(self, job_id: str) -> bool:
        """Whether an operator asked to cancel the job (False if Redis is down;
        the control loop keeps looking while the job runs)."""
        try:
            key = self.bkeys.cancel(self.spec.prefix, self.name, job_id)
            return bool(await self._bp.exists(key))
        except Exception as exc:  # noqa: BLE001 - a Redis blip must not fail the job
            self.worker.background.failed(
                f"reading the cancel flag of job {job_id}", exc
            )
            return False

    async def _on_oom(self, job: Job, exc: BaseException) -> None:
        self.counters["oom"] += 1
        log.warning(
            "job %s: CUDA out of memory on GPU %s (%s)",
            job.id,
            self.device.uuid,
            str(exc).splitlines()[0][:300],
        )
        try:
            await self._bp.hincrby(
                self.bkeys.gpu_counters(self.device.uuid), "oom_total", 1
            )
        except Exception as err:  # noqa: BLE001 - counting must not mask the OOM
            self.worker.background.failed("counting a CUDA OOM", err)
        loop = asyncio.get_running_loop()
        healthy = await loop.run_in_executor(None, cuda_self_check, self.device)
        if not healthy:
            log.error(
                "CUDA is broken on GPU %s after an OOM: closing this worker "
                "process so the supervisor restarts it",
                self.device.uuid,
            )
            self.exit_code = defaults.EXIT_CUDA_BROKEN
            self.worker.close_timeout = defaults.BROKEN_CLOSE_TIMEOUT_S
            self.close()

    async def _correct_outcome(self, job_id: str, code: int) -> None:
        await self.recorder.correct_outcome(job_id, code)
