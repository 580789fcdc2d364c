"""A worker process: `python -m gpu_workers.child`, its WorkerSpec JSON on
stdin (it holds the Redis URL and password, which argv would show to `ps`).

The supervisor starts it with CUDA_VISIBLE_DEVICES=<uuid>; its exit status
says what happened: 0 drained, EXIT_CUDA_BROKEN after a broken CUDA state,
EXIT_CONFIG when it could not start (bad spec, handler import, no GPU).
"""

from __future__ import annotations

import asyncio
import logging
import sys

from . import defaults, logs
from .config import WorkerSpec
from .exceptions import GpuWorkerError
from .handlers import load_handler_modules
from .probe import make_probe
from .units import format_bytes
from .worker import GpuWorker


def main(argv: list[str] | None = None) -> int:
    """Run one GpuWorker until it drains; return the exit status. The spec
    is read from stdin unless given as the first argument (tests)."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        spec = WorkerSpec.from_json(argv[0] if argv else sys.stdin.read())
    except (ValueError, TypeError) as exc:
        print(f"gpu_workers.child: bad worker spec: {exc}", file=sys.stderr)
        return defaults.EXIT_CONFIG
    logs.configure(
        spec.log_level,
        spec.log_format,
        f"%(asctime)s %(levelname)s [{spec.worker_id} pid %(process)d] "
        "%(name)s: %(message)s",
    )
    log = logging.getLogger("gpu_workers.child")
    try:
        load_handler_modules(spec.handler_modules)
        probe = make_probe(spec.gpus, host=spec.host)
        worker = GpuWorker(spec, probe)
    except GpuWorkerError as exc:
        log.error("cannot start: %s", exc)
        return defaults.EXIT_CONFIG
    log.info(
        "serving %s:%s on %s with a %s VRAM budget (%d bytes), %d slot(s)",
        spec.prefix,
        spec.queue,
        spec.gpu_uuid,
        format_bytes(worker.admission.budget_bytes),
        worker.admission.budget_bytes,
        spec.slots,
    )
    asyncio.run(worker.run())
    log.info("stopped (exit %d)", worker.exit_code)
    return worker.exit_code


if __name__ == "__main__":
    sys.exit(main())
