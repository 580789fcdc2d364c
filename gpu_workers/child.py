"""A worker process: `python -m gpu_workers.child`, its WorkerSpec JSON on
stdin (it holds the Redis URL and password, which argv would show to `ps`).

The spec is one object (one queue on one GPU: a `GpuWorker`) or a list of
them (every queue of one GPU: a `GpuProcess`, gpu_process.py).

The supervisor starts it with CUDA_VISIBLE_DEVICES=<uuid>; its exit status
says what happened: 0 drained, EXIT_CUDA_BROKEN after a broken CUDA state,
EXIT_RECYCLE when VRAM it could not give back kept its claimed jobs out (it
gave them back first), EXIT_CONFIG when it could not start (bad spec,
handler import, no GPU).
"""

from __future__ import annotations

import json
import logging
import sys

from queues.eventloop import run

from . import defaults, logs
from .config import WorkerSpec
from .exceptions import GpuWorkerError
from .gpu_process import GpuProcess
from .handlers import load_handler_modules
from .probe import make_probe
from .units import format_bytes
from .worker import GpuWorker


def main(argv: list[str] | None = None) -> int:
    """Run one GpuWorker (or one GpuProcess) until it drains; return the exit
    status. The spec is read from stdin unless given as the first argument
    (tests)."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        text = argv[0] if argv else sys.stdin.read()
        many = isinstance(json.loads(text), list)
        specs = WorkerSpec.list_from_json(text)
    except (ValueError, TypeError, GpuWorkerError) as exc:
        print(f"gpu_workers.child: bad worker spec: {exc}", file=sys.stderr)
        return defaults.EXIT_CONFIG
    if not specs:
        print("gpu_workers.child: an empty list of worker specs", file=sys.stderr)
        return defaults.EXIT_CONFIG
    spec = specs[0]
    name = f"{spec.host}:{spec.gpu_uuid}" if many else spec.worker_id
    logs.configure(
        spec.log_level,
        spec.log_format,
        f"%(asctime)s %(levelname)s [{name} pid %(process)d] %(name)s: %(message)s",
    )
    log = logging.getLogger("gpu_workers.child")
    try:
        load_handler_modules(spec.handler_modules)
        probe = make_probe(spec.gpus, host=spec.host)
        runner: GpuWorker | GpuProcess = (
            GpuProcess(specs, probe) if many else GpuWorker(spec, probe)
        )
    except GpuWorkerError as exc:
        log.error("cannot start: %s", exc)
        return defaults.EXIT_CONFIG
    budget = runner.admission.budget_bytes
    for s in specs:
        log.info(
            "serving %s:%s on %s with a %s VRAM budget (%d bytes)%s, %d slot(s)",
            s.prefix,
            s.queue,
            s.gpu_uuid,
            format_bytes(budget),
            budget,
            " shared by the process's queues" if many else "",
            s.slots,
        )
    run(runner.run())  # uvloop where installed (queues/eventloop.py)
    log.info("stopped (exit %d)", runner.exit_code)
    return runner.exit_code


if __name__ == "__main__":
    sys.exit(main())
