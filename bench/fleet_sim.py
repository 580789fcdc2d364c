"""The simulated fleet of bench/fleet.py: --hosts hosts x --gpus simulated GPUs
in this one process, on the real code paths, without child processes.

    python bench/fleet_sim.py --url URL --hosts 8 --gpus 8 --queues q0,q1
        [--first-host 0]

Per host: a real `Supervisor` (gpu_workers/supervisor.py) over a
SimulatedProbe (`sim:<gpus>x80GiB`, the host's name in its UUIDs), its
children entered as running with a stand-in process (no processes are
spawned), running its own loop (`Supervisor.run`: host beats vouching for
its workers, desired counts pushed on its control stream, the series
sampler) in a thread of its own. Per simulated GPU: a real `GpuWorker` (one
queue per GPU, the queues dealt round-robin over all GPUs) on this
process's event loop, supervised (its spec names the liveness file its
supervisor reads), with its heartbeat, control and peak loops, claiming jobs
named `noop` through VRAM admission (1 GiB each) and an async no-op
handler.

Line protocol: prints {"ready": true, "workers": n, "hosts": h, "notes": [...]}
once every worker has published its first heartbeat, then waits for a STOP
line, closes every worker and exits.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpu_workers.children import Child, ChildState  # noqa: E402
from gpu_workers.config import QueueConfig, SupervisorConfig, WorkerSpec  # noqa: E402
from gpu_workers.exceptions import ConfigError  # noqa: E402
from gpu_workers.handlers import HandlerRegistry, JobContext  # noqa: E402
from gpu_workers.probe import make_probe  # noqa: E402
from gpu_workers.supervisor import Supervisor  # noqa: E402
from gpu_workers.worker import GpuWorker  # noqa: E402

GPU_SIZE = "80GiB"
JOB_VRAM = "1GiB"


async def noop(ctx: JobContext) -> None:
    return None


class SimProcess:
    """Stands in for a child's process: alive until signalled (its worker
    is closed by then)."""

    pid = os.getpid()

    def __init__(self) -> None:
        self.code: int | None = None

    def poll(self) -> int | None:
        return self.code

    def kill(self) -> None:
        self.code = -9

    def wait(self, timeout: float | None = None) -> int:
        return self.code or 0

    def send_signal(self, sig: int) -> None:
        self.code = 0


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def queue_config(name: str, prefix: str, slots: int, gpus: list[int]) -> QueueConfig:
    """The host's config of a queue. Hash-tagged names (`{q0}`), which a
    cluster needs, are refused by the config's name rule: the supervisor then
    gets the name without braces and only the worker specs carry the tag."""
    try:
        return QueueConfig(name, prefix=prefix, slots=slots, gpus=list(gpus))
    except ConfigError:
        plain = name.replace("{", "").replace("}", "")
        return QueueConfig(plain, prefix=prefix, slots=slots, gpus=list(gpus))


def build(
    args: argparse.Namespace,
) -> tuple[list[Supervisor], list[GpuWorker], list[str]]:
    """Every host's supervisor and every GPU's worker (not started)."""
    registry = HandlerRegistry()
    registry.register("noop", noop, vram=JOB_VRAM)
    queues = args.queues.split(",")
    notes: list[str] = []
    supervisors: list[Supervisor] = []
    workers: list[GpuWorker] = []
    spec = f"sim:{args.gpus}x{GPU_SIZE}"
    for h in range(args.first_host, args.first_host + args.hosts):
        host = f"sim-{h:03d}"
        on_gpu = {
            i: queues[(h * args.gpus + i) % len(queues)] for i in range(args.gpus)
        }
        configs = {}
        for name in dict.fromkeys(on_gpu.values()):
            gpus = [i for i, q in on_gpu.items() if q == name]
            configs[name] = queue_config(name, args.prefix, args.slots, gpus)
            if configs[name].queue != name and not notes:
                notes.append(
                    f"QueueConfig refuses the queue name {name!r} (gpu_workers/"
                    "config.py check_safe_queue_name): the supervisors' records "
                    f"name it {configs[name].queue!r}; the workers' specs carry "
                    f"{name!r} as given"
                )
        probe = make_probe(spec, host)
        sup = Supervisor(
            SupervisorConfig(
                redis_url=args.url,
                queues=list(configs.values()),
                host=host,
                gpus=spec,
                handler_modules=[],
                process_per_gpu=False,  # the children entered below
            ),
            probe,
        )
        # Never a real process: a child it wants beyond those is a note.
        sup._spawn = lambda child, slots, notes=notes: notes.append(  # type: ignore[method-assign,misc]
            f"a supervisor wanted to start {child.slot}: not simulated"
        )
        for name, qc in configs.items():
            for gpu, budget in sup._plan[qc.key]:
                child = Child(qc, gpu, budget, state=ChildState.RUNNING)
                child.proc = SimProcess()  # type: ignore[assignment]
                sup.children[child.slot] = child
                workers.append(
                    GpuWorker(
                        WorkerSpec(
                            redis_url=args.url,
                            host=host,
                            queue=name,
                            prefix=args.prefix,
                            gpu_uuid=gpu.uuid,
                            gpus=spec,
                            budget_bytes=budget,
                            slots=args.slots,
                            max_slots=qc.max_slots,
                            handler_modules=[],
                            metrics_data_points=0,
                            alive_file=str(sup.alive_file(child)),
                        ),
                        probe,
                        registry,
                    )
                )
        supervisors.append(sup)
    return supervisors, workers, notes


async def main(args: argparse.Namespace) -> None:
    supervisors, workers, notes = build(args)
    threads = [
        threading.Thread(target=sup.run, args=(False,), daemon=True)
        for sup in supervisors
    ]
    for thread in threads:
        thread.start()
    tasks = [asyncio.create_task(w.run(install_signals=False)) for w in workers]
    loop = asyncio.get_running_loop()
    # Ready once every worker has started (state leaves "starting").
    deadline = time.monotonic() + args.start_timeout_s
    while any(w._state == "starting" for w in workers):
        if time.monotonic() > deadline or all(t.done() for t in tasks):
            break
        await asyncio.sleep(0.1)
    failed = [str(t.exception()) for t in tasks if t.done() and t.exception()]
    if failed:
        notes.append(f"{len(failed)} worker(s) failed to start: {failed[0]}")
    emit(
        {
            "ready": True,
            "hosts": len(supervisors),
            "workers": len(workers),
            "running": sum(1 for t in tasks if not t.done()),
            "notes": notes,
        }
    )
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line or line.strip() == "STOP":
            break
    for w in workers:
        w.close(force=True)
    await asyncio.wait(tasks, timeout=20)
    for sup in supervisors:
        sup.stop()
    for thread in threads:
        thread.join(10)
    emit({"stopped": True})


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--hosts", type=int, default=1)
    parser.add_argument("--gpus", type=int, default=8, help="simulated GPUs per host")
    parser.add_argument(
        "--first-host", type=int, default=0, help="number of the first host (sim-NNN)"
    )
    parser.add_argument("--queues", default="fleet0", help="comma-separated names")
    parser.add_argument("--prefix", default="bull")
    parser.add_argument("--slots", type=int, default=3)
    parser.add_argument("--start-timeout-s", type=float, default=60.0)
    logging.basicConfig(level=logging.WARNING, format="fleet_sim %(name)s: %(message)s")
    asyncio.run(main(parser.parse_args()))
