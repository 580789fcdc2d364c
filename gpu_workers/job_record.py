"""What a GPU worker writes beside each job it ran: declared vs measured VRAM
(the hash `bullpen:job:{prefix}:{queue}:{id}` and a job log line), the GPU's
side of the attempt record, the attempt's GPU time (gputime.py) and, for a
grouped job, its group's GPU-seconds today against its quota (quota.py)."""

from __future__ import annotations

import os
from typing import Any

from queues import AsyncWorker, Job
from queues.names import qualified_name

from . import defaults
from .admission import VramAdmission
from .clock import now_ms
from .config import WorkerSpec
from .device import Device
from .gputime import GpuTimeRecorder, Usage, job_name_key, tenant_of
from .handlers import JobMeter
from .keys import BullpenKeys
from .quota import QuotaKeeper, group_of
from .units import format_bytes


class JobRecorder:
    """Records what each job of one GPU worker used."""

    def __init__(
        self,
        worker: AsyncWorker,
        spec: WorkerSpec,
        device: Device,
        admission: VramAdmission,
        bkeys: BullpenKeys,
        bp: Any,
        gpu_time: GpuTimeRecorder,
    ) -> None:
        self.worker = worker
        self.spec = spec
        self.device = device
        self.admission = admission
        self.bkeys = bkeys
        self._bp = bp
        self.gpu_time = gpu_time
        #: Grouped attempts' GPU-seconds per day, and the quota holds.
        self.quota = QuotaKeeper(bp, bkeys, worker.queue)

    async def record(self, job: Job, meter: JobMeter, outcome: str) -> None:
        """Store declared vs measured VRAM beside the job, before it finishes."""
        peak, source = meter.best_peak()
        fields: dict[str, Any] = {
            "declared_bytes": meter.declared_bytes,
            "outcome": outcome,
            "gpu": self.device.uuid,
            "simulated": int(self.device.simulated),
            "host": self.spec.host,
            "worker": self.spec.worker_id,
            "pid": os.getpid(),
            "claimed_ms": meter.claimed_ms,
            "finished_ms": now_ms(),
            "budget_bytes": self.admission.budget_bytes,
        }
        if meter.started_ms is not None:
            fields["started_ms"] = meter.started_ms
        if meter.admitted_us is not None and meter.released_us is not None:
            fields["admitted_us"] = meter.admitted_us
            fields["released_us"] = meter.released_us
        if peak is not None:
            fields["peak_bytes"] = peak
            fields["peak_source"] = source
        if meter.process_peak_bytes is not None:
            fields["process_peak_bytes"] = meter.process_peak_bytes
        usage = self._usage(job, meter, peak)
        self._annotate_attempt(job, fields, peak, usage)
        if usage is not None:
            try:
                await self.gpu_time.record(usage)
            except Exception as exc:  # noqa: BLE001 - accounting must not fail the job
                self.worker.background.failed(
                    f"counting the GPU time of job {job.id}", exc
                )
            await self._count_group(job, usage)
        key = self.bkeys.job(self.spec.prefix, self.spec.queue, job.id)
        try:
            pipe = self._bp.pipeline(transaction=False)
            pipe.delete(key)
            pipe.hset(key, mapping=fields)
            pipe.expire(key, defaults.JOB_RECORD_TTL_S)
            await pipe.execute()
            if meter.declared_bytes or peak is not None:
                await job.log(
                    f"vram: declared {format_bytes(meter.declared_bytes)}, "
                    f"peak {format_bytes(peak) if peak is not None else 'n/a'}"
                    f" ({source or 'not measured'}) on {self.device.uuid}"
                )
        except Exception as exc:  # noqa: BLE001 - bookkeeping must not fail the job
            self.worker.background.failed(
                f"recording the VRAM use of job {job.id}", exc
            )

    async def _count_group(self, job: Job, usage: Usage) -> None:
        """Add a grouped attempt to its group's day; past its budget the
        group is held (quota.py). Jobs without a group cost nothing here."""
        group = group_of(job)
        if group is None:
            return
        try:
            await self.quota.record(usage, group)
        except Exception as exc:  # noqa: BLE001 - a quota must not fail the job
            self.worker.background.failed(
                f"counting job {job.id}'s GPU time against group {group}'s quota",
                exc,
            )

    def _usage(self, job: Job, meter: JobMeter, peak: int | None) -> Usage | None:
        """What the attempt used of the GPU (None: it never ran on it)."""
        if meter.admitted_us is None or meter.released_us is None:
            return None
        return Usage(
            queue=qualified_name(self.spec.prefix, self.spec.queue),
            name=job_name_key(job.name),
            tenant=tenant_of(job.opts),
            started_s=meter.admitted_us / 1e6,
            ended_s=meter.released_us / 1e6,
            vram_bytes=max(meter.declared_bytes, peak or 0),
            simulated=bool(self.device.simulated),
        )

    def _annotate_attempt(
        self, job: Job, fields: dict[str, Any], peak: int | None, usage: Usage | None
    ) -> None:
        """Add the GPU's side of this attempt to its attempt record."""
        attempts = self.worker.reports.attempts
        if attempts is None:
            return
        attempts.annotate(
            job,
            gpu=self.device.uuid,
            gpu_index=self.device.index,
            simulated=bool(self.device.simulated),
            host=self.spec.host,
            worker=self.spec.worker_id,
            declared_bytes=fields["declared_bytes"],
            peak_bytes=peak,
            run_started_ms=fields.get("started_ms"),
        )
        if usage is not None:
            attempts.annotate(
                job,
                gpu_seconds=round(usage.gpu_seconds, 3),
                vram_gib_seconds=round(usage.vram_gib_seconds, 3),
                tenant=usage.tenant,
            )

    async def correct_outcome(self, job_id: str, code: int) -> None:
        """An end Redis refused to save: the VRAM record said what the
        processor hoped (written before the end); make it say what happened."""
        key = self.bkeys.job(self.spec.prefix, self.spec.queue, job_id)
        pipe = self._bp.pipeline(transaction=False)
        pipe.hset(key, "outcome", f"lost (finish refused, code {code})")
        pipe.expire(key, defaults.JOB_RECORD_TTL_S)
        await pipe.execute()
