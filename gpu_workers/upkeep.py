"""The upkeep side of a `GpuWorker`: what keeps it visible and steerable
while it runs jobs.

- heartbeats: its record (GPU reading, budget, running jobs, counters) every
  interval, and soon after a job is claimed, admitted or ends. Under a
  supervisor (`spec.alive_file` set) a beat rewrites a local liveness file,
  and the record only when it changed or every RECORD_REFRESH_S: the
  supervisor vouches for the worker in Redis (heartbeat.py);
- control: cancel flags of its claimed jobs (polled while jobs run, pushed
  at any time), its slot target from the desired counts (pushed, and
  re-read every CONTROL_SAFETY_S: control.py), and whether its supervisor
  is still alive (a local call);
- peaks: this process's VRAM, sampled while jobs run.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from typing import Any

from queues.names import qualified_name
from queues.worker import AsyncWorker

from . import defaults
from .admission import QueueClaims, VramAdmission
from .clock import now_ms
from .config import WorkerSpec
from .control import AsyncControlWatch
from .desired import parse_desired
from .device import Device
from .handlers import JobMeter
from .heartbeat import queue_heartbeat, queue_record, queue_removal, settled
from .keys import BullpenKeys
from .liveness import LivenessFile
from .model_upkeep import ModelUpkeep
from .probe import GpuProbe

log = logging.getLogger("gpu_workers.worker")


class WorkerUpkeep:
    """Heartbeat, control and peak loops of one GPU worker, beside its queue
    worker (set up by GpuWorker)."""

    def __init__(
        self,
        worker: AsyncWorker,
        spec: WorkerSpec,
        probe: GpuProbe,
        device: Device,
        admission: VramAdmission,
        bkeys: BullpenKeys,
        bp: Any,
        meters: dict[str, JobMeter],
        counters: dict[str, int],
        state: Callable[[], str],
        models: ModelUpkeep | None = None,
        claims: VramAdmission | QueueClaims | None = None,
        process: dict[str, Any] | None = None,
    ) -> None:
        #: The queue worker: closed when the supervisor is gone; its
        #: background reports this side's Redis errors too.
        self.worker = worker
        self.spec = spec
        self.probe = probe
        self.device = device
        self.admission = admission
        self.bkeys = bkeys
        #: Bullpen's own keys; decode_responses, so replies are str.
        self._bp = bp
        #: The running jobs' meters (cancel flags, peaks), by job id.
        self.meters = meters
        #: The GPU worker's job counters and state, for its heartbeats.
        self._counters = counters
        self._state = state
        #: Its resident models' side (model_upkeep.py), or None.
        self.models = models
        #: Its queue's claim policy: the admission, or its view of a shared one.
        self.claims = claims if claims is not None else admission
        #: The GPU process it is one queue of ({"pid", "queues"}), or None:
        #: then that process runs the model upkeep loop, once for all queues.
        self.process = process
        self.started_ms = now_ms()
        self._ppid = os.getppid()
        self._stop = asyncio.Event()
        #: Set when a job is claimed, admitted or ends: beat soon (see defaults).
        self._changed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        #: Under a supervisor: the file it reads to vouch for this worker.
        self.alive = LivenessFile(spec.alive_file, 0) if spec.alive_file else None
        #: The last record written (settled), and when the next refresh is due.
        self._written: str | None = None
        self._refresh_at = 0.0
        #: The blocking read of this host's and the fleet's control streams.
        self.control = AsyncControlWatch(
            bp, [bkeys.control_host(spec.host), bkeys.control_all()]
        )

    def beat_soon(self) -> None:
        """A job was claimed, admitted or ended: heartbeat soon."""
        self._changed.set()

    async def start(self) -> None:
        """The first heartbeat, then the loops as tasks."""
        try:  # Redis may be full, read-only or away now: the loop retries
            await self._heartbeat()
        except Exception as exc:  # noqa: BLE001 - never die of a Redis answer
            self.worker.background.failed("heartbeat", exc)
        self._tasks = [
            asyncio.create_task(self._heartbeat_loop()),
            asyncio.create_task(self._control_loop()),
            asyncio.create_task(
                self.control.run(self._stop, self.worker.background.failed)
            ),
            asyncio.create_task(self._peak_loop()),
        ]
        if self.models is not None and self.process is None:
            every = self.spec.heartbeat_interval_s
            self._tasks.append(
                asyncio.create_task(self.models.loop(self._pause, every))
            )

    async def stop(self) -> None:
        """Stop the loops."""
        # A stop flag, not only cancel(): redis-py's asyncio client can
        # swallow a CancelledError that lands mid-command (redis-py #2028).
        self._stop.set()
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=5)
        await self.control.close()

    async def unpublish(self) -> None:
        """Remove this worker's record (a clean stop)."""
        if self.alive is not None:  # the supervisor stops vouching first
            self.alive.remove()
        try:
            pipe = self._bp.pipeline(transaction=False)
            queue_removal(pipe, self.bkeys, "worker", self.spec.worker_id)
            await pipe.execute()
        except Exception as exc:  # noqa: BLE001 - the TTL removes it anyway
            log.warning("could not remove the heartbeat record: %r", exc)

    def heartbeat_record(self) -> dict[str, Any]:
        """What this worker publishes every heartbeat."""
        try:
            gpu = self.probe.snapshot(self.device.uuid).to_dict()
        except Exception as exc:  # noqa: BLE001 - a failing reading is reported, not fatal
            gpu = {
                "uuid": self.device.uuid,
                "name": self.device.name,
                "simulated": self.device.simulated,
                "error": str(exc),
            }
        adm = self.admission
        record = {
            "id": self.spec.worker_id,
            "host": self.spec.host,
            "pid": os.getpid(),
            "queue": self.spec.queue,
            "prefix": self.spec.prefix,
            "gpu": gpu,
            "simulated": self.device.simulated,
            "slots": self.claims.slots,
            "max_slots": self.spec.max_slots,
            "budget_bytes": adm.budget_bytes,
            "committed_bytes": adm.committed_bytes,
            "free_bytes": adm.free_bytes,
            "max_committed_bytes": adm.max_committed_bytes,
            "running": [self._running(m) for m in self.meters.values()],
            "counters": dict(self._counters),
            "telemetry": dict(self.worker.telemetry.counters),
            "restarts": self.spec.restarts,
            "state": self._state(),
            "started_ms": self.started_ms,
            "ts_ms": now_ms(),
        }
        if self.models is not None:
            res = self.models.residency
            record["models"] = res.summary()
            record["model_counters"] = res.counters_summary()
            record["weights_bytes"] = adm.held_bytes
            record["working_bytes"] = adm.working_bytes
        if self.process is not None:
            record["process"] = dict(self.process)
        if self.alive is not None:
            record["refresh_s"] = defaults.RECORD_REFRESH_S
        return record

    def _running(self, meter: JobMeter) -> dict[str, Any]:
        """A running job as the heartbeat lists it; one whose model is still
        loading reads `loading_model`."""
        summary = meter.summary()
        if self.models is not None and meter.model and not meter.admitted:
            loading = self.models.residency.loading_of(meter.model)
            key = self.claims.key(meter.job_id)
            if loading is not None and key in self.admission.admitted:
                summary["state"] = "loading_model"
                summary["loading"] = loading
        return summary

    async def _heartbeat(self) -> None:
        record = self.heartbeat_record()
        if self.alive is None:  # on its own: the whole heartbeat, every beat
            pipe = self._bp.pipeline(transaction=False)
            queue_heartbeat(
                pipe,
                self.bkeys,
                "worker",
                self.spec.worker_id,
                record,
                self.spec.heartbeat_ttl_s,
            )
            await pipe.execute()
            return
        try:
            self.alive.beat()
        except OSError as exc:  # the supervisor stops vouching: it shows
            log.warning("liveness file %s: %r", self.alive.path, exc)
        now = time.monotonic()
        seen = settled(record)
        changed = seen != self._written
        if not changed and now < self._refresh_at:
            return
        pipe = self._bp.pipeline(transaction=False)
        queue_record(
            pipe,
            self.bkeys,
            "worker",
            self.spec.worker_id,
            record,
            self.spec.heartbeat_ttl_s,
            stream=changed,
        )
        await pipe.execute()
        self._written = seen
        self._refresh_at = now + defaults.RECORD_REFRESH_S

    async def _pause(self, seconds: float) -> bool:
        """Sleep; False once the helpers are told to stop."""
        try:
            await asyncio.wait_for(self._stop.wait(), seconds)
        except TimeoutError:
            pass
        return not self._stop.is_set()

    async def _heartbeat_loop(self) -> None:
        """Beat every interval, and at most HEARTBEAT_SOON_S after a change."""
        while True:
            due = time.monotonic() + self.spec.heartbeat_interval_s
            waits = [
                asyncio.ensure_future(self._stop.wait()),
                asyncio.ensure_future(self._changed.wait()),
            ]
            await asyncio.wait(
                waits,
                timeout=self.spec.heartbeat_interval_s,
                return_when=asyncio.FIRST_COMPLETED,
            )
            for w in waits:
                w.cancel()
            if self._changed.is_set():
                # Let the rest of a burst of changes join this beat.
                soon = min(due, time.monotonic() + defaults.HEARTBEAT_SOON_S)
                if not await self._pause(soon - time.monotonic()):
                    return
            if self._stop.is_set():
                return
            self._changed.clear()
            try:
                await self._heartbeat()
                self.worker.background.answered()
            except Exception as exc:  # noqa: BLE001 - keep beating after Redis blips
                self.worker.background.failed("heartbeat", exc)

    async def _control_loop(self) -> None:
        """The parent's life (locally, every control interval), cancel flags
        of claimed jobs (polled while jobs run, read at once when pushed),
        and the slot target (read when pushed, and every CONTROL_SAFETY_S)."""
        safety_at = time.monotonic()  # read once at start, then when due
        while not self._stop.is_set():
            pushed = self.control.pushed
            try:
                await asyncio.wait_for(pushed.wait(), self.spec.control_interval_s)
            except TimeoutError:
                pass
            if self._stop.is_set():
                return
            pushed.clear()
            found = self.control.take()
            if os.getppid() != self._ppid and not self.worker.closing:
                log.warning(
                    "worker %s: supervisor is gone; draining", self.spec.worker_id
                )
                self.worker.close()
            if found.models and self.models is not None:
                self.models.read_due = True
            mine = qualified_name(self.spec.prefix, self.spec.queue)
            asked = {job for queue, job in found.cancels if queue == mine}
            safety = time.monotonic() >= safety_at
            try:
                if self.meters and (asked & set(self.meters) or not found):
                    await self._read_cancels()
                if found.desired or safety:
                    safety_at = time.monotonic() + defaults.CONTROL_SAFETY_S
                    await self._read_slots()
            except Exception as exc:  # noqa: BLE001 - keep watching after Redis blips
                self.worker.background.failed("control loop", exc)

    async def _read_cancels(self) -> None:
        """Set the cancel of each claimed job whose flag is set."""
        ids = list(self.meters)
        # GETs in a pipeline, not MGET: the flags may sit in different slots
        # of a Redis Cluster.
        pipe = self._bp.pipeline(transaction=False)
        for i in ids:
            pipe.get(self.bkeys.cancel(self.spec.prefix, self.spec.queue, i))
        flags = await pipe.execute()
        poke = False
        for job_id, flag in zip(ids, flags, strict=True):
            meter = self.meters.get(job_id)
            if flag and meter is not None and not meter.cancel.is_set():
                log.info("job %s: cancel requested", job_id)
                meter.cancel.set()
                poke = True
        if poke:
            await self.admission.poke()

    async def _read_slots(self) -> None:
        """Follow the slot target of this host's desired counts."""
        field = qualified_name(self.spec.prefix, self.spec.queue)
        raw = await self._bp.hget(self.bkeys.desired(self.spec.host), field)
        slots = parse_desired(raw).get("slots")
        if slots and slots != self.claims.slots:
            self.claims.resize(min(slots, self.spec.max_slots))
            self.beat_soon()  # pages show the new slots at once

    async def _peak_loop(self) -> None:
        """Sample this process's VRAM (NVML by pid, or simulated) while jobs run."""
        while await self._pause(defaults.PEAK_SAMPLE_INTERVAL_S):
            self.sample_peaks()

    def sample_peaks(self) -> None:
        """One sample of this process's VRAM, credited to every running job
        (also taken at each admission and at each job's end)."""
        running = [m for m in self.meters.values() if m.admitted]
        if not running:
            return
        try:
            used = self.probe.process_memory(self.device.uuid).get(os.getpid())
        except Exception:  # noqa: BLE001 - a missing sample is not an error
            return
        if used is None:
            return
        for meter in running:
            meter.process_peak_bytes = max(meter.process_peak_bytes or 0, used)
