"""`GpuProcess`: one worker process per GPU, serving every queue configured
for that GPU with one CUDA context and one set of resident models.

It builds one `Device`, one `VramAdmission` holding the GPU's whole budget,
one `Residency` and one `ModelUpkeep`, and one `GpuWorker` per queue spec
sharing them (`SharedGpu`). Each queue's worker claims through its own view
of the admission (admission.QueueClaims): its own slots, and no claim while
a claimed job of any queue still waits for budget. So at every moment the
resident models' weights plus the running jobs' working memory, over all
queues, stay within the budget, and a model loaded for a job of one queue
serves the jobs of every other queue.

The model upkeep loop (stats, pins, warm pool, preloads) runs once here,
not per queue. Loads are reported and billed under the first queue (a load
serves every queue of the process).

SIGTERM/SIGINT (or close()) drains every queue's worker; when one worker
stops (CUDA broken after an OOM, the supervisor gone, an error) the others
are closed too, and the exit status is the worst: EXIT_CUDA_BROKEN wins.
VRAM the process could not give back that keeps claimed jobs out recycles
it: every queue's worker gives those jobs back and drains (EXIT_RECYCLE).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from typing import Any

from queues.connection import async_from_url
from queues.names import qualified_name

from . import defaults
from .admission import VramAdmission
from .config import WorkerSpec
from .device import open_device
from .exceptions import ConfigError
from .gputime import GpuTimeRecorder, Retention
from .handlers import REGISTRY, HandlerRegistry
from .keys import BullpenKeys
from .model_upkeep import ModelUpkeep
from .probe import GpuProbe
from .residency import Residency
from .shared_gpu import SharedGpu
from .worker import GpuWorker

log = logging.getLogger("gpu_workers.gpu_process")

#: What must be the same in every spec of one process.
SAME = ("redis_url", "host", "gpu_uuid", "gpus", "budget_bytes", "namespace")


def check_specs(specs: list[WorkerSpec]) -> None:
    """ConfigError unless the specs are one GPU's, of distinct queues."""
    if not specs:
        raise ConfigError("a GPU process needs at least one queue")
    for name in SAME:
        values = {getattr(s, name) for s in specs}
        if len(values) > 1:
            raise ConfigError(f"the specs of one GPU process differ in {name}")
    keys = [qualified_name(s.prefix, s.queue) for s in specs]
    if len(set(keys)) != len(keys):
        raise ConfigError(f"a queue is listed twice: {keys}")


class GpuProcess:
    """Every queue's worker of one GPU in one process."""

    def __init__(
        self,
        specs: list[WorkerSpec],
        probe: GpuProbe,
        registry: HandlerRegistry = REGISTRY,
    ) -> None:
        check_specs(specs)
        first = specs[0]
        self.specs = specs
        device = open_device(probe, first.gpu_uuid, first.context_bytes)
        admission = VramAdmission(first.budget_bytes, 0, first.gpu_uuid)
        residency = Residency(admission, device, probe, registry.models)
        bkeys = BullpenKeys(first.namespace)
        # Bullpen's own keys; decode_responses, so replies are str.
        self._bp: Any = async_from_url(first.redis_url, decode_responses=True)
        gpu_time = GpuTimeRecorder(
            self._bp,
            bkeys,
            Retention(
                first.gpu_time_hours_kept,
                first.gpu_time_days_kept,
                first.gpu_time_max_keys,
            ),
        )
        models = ModelUpkeep(
            residency,
            self._bp,
            bkeys,
            gpu=first.gpu_uuid,
            host=first.host,
            worker_id=first.worker_id,
            queue=first.queue,
            prefix=first.prefix,
            context_bytes=first.context_bytes,
            gpu_time=gpu_time,
            failed=self._failed,
            waiting=lambda: admission.waiting() > 0,
            ttl_s=first.heartbeat_ttl_s,
        )
        process = {
            "pid": os.getpid(),
            "queues": [qualified_name(s.prefix, s.queue) for s in specs],
        }
        self.shared = SharedGpu(device, admission, residency, models, process)
        self.workers = [
            GpuWorker(spec, probe, registry, shared=self.shared) for spec in specs
        ]
        models.on_stuck = self._recycle
        self._stop = asyncio.Event()

    @property
    def admission(self) -> VramAdmission:
        """The GPU's one admission (its whole budget)."""
        return self.shared.admission

    @property
    def residency(self) -> Residency:
        """The models resident on the GPU, shared by every queue."""
        return self.shared.residency

    @property
    def exit_code(self) -> int:
        """The worst of the workers': EXIT_CUDA_BROKEN wins, else the largest."""
        codes = [w.exit_code for w in self.workers]
        if defaults.EXIT_CUDA_BROKEN in codes:
            return defaults.EXIT_CUDA_BROKEN
        return max(codes)

    def close(self, force: bool = False) -> None:
        """Drain every queue's worker."""
        for worker in self.workers:
            worker.close(force)

    async def _recycle(self, lost_bytes: int) -> None:
        """Unreclaimed VRAM keeps claimed jobs out: every queue's worker
        gives its waiting jobs back and drains; the process exits with
        EXIT_RECYCLE (GpuWorker.recycle)."""
        for worker in self.workers:
            await worker.recycle(lost_bytes)

    def _failed(self, what: str, exc: BaseException) -> None:
        """Report a model upkeep error through the first worker's background."""
        self.workers[0].worker.background.failed(what, exc)

    async def _pause(self, seconds: float) -> bool:
        """Sleep; False once the process stops."""
        try:
            await asyncio.wait_for(self._stop.wait(), seconds)
        except TimeoutError:
            pass
        return not self._stop.is_set()

    async def run(self, install_signals: bool = True) -> None:
        """Run every queue's worker and the model upkeep until all stopped."""
        loop = asyncio.get_running_loop()
        if install_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self.close)
        every = self.specs[0].heartbeat_interval_s
        upkeep = asyncio.create_task(self.shared.models.loop(self._pause, every))
        tasks = {
            asyncio.create_task(w.run(install_signals=False)): w for w in self.workers
        }
        error: BaseException | None = None
        try:
            pending = set(tasks)
            while pending:
                done, pending = await asyncio.wait(
                    pending, return_when=asyncio.FIRST_COMPLETED
                )
                for task in done:
                    if task.exception() is not None and error is None:
                        error = task.exception()
                self._stop_the_rest(tasks[t] for t in done)
        finally:
            self._stop.set()
            upkeep.cancel()
            await asyncio.wait([upkeep], timeout=5)
            self.shared.residency.close()
            await self._bp.aclose()
            if install_signals:
                for sig in (signal.SIGTERM, signal.SIGINT):
                    loop.remove_signal_handler(sig)
        if error is not None:
            raise error

    def _stop_the_rest(self, stopped: Any) -> None:
        """One worker stopped: the process serves all its queues or none."""
        broken = any(w.exit_code == defaults.EXIT_CUDA_BROKEN for w in stopped)
        for worker in self.workers:
            if worker.closing:
                continue
            log.info(
                "worker %s: draining (another queue of this GPU process stopped)",
                worker.spec.worker_id,
            )
            if broken:
                worker.exit_code = defaults.EXIT_CUDA_BROKEN
                worker.worker.close_timeout = defaults.BROKEN_CLOSE_TIMEOUT_S
            worker.close()
