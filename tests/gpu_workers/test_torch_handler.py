"""The PyTorch handler and the worker's CUDA OOM path, on a stand-in torch
module (the real thing runs in bench/gpu_check.py on a GPU)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

import gpu_workers.torch_handlers  # noqa: F401 - registers torch.matmul
from gpu_workers.exceptions import OOM_REASON
from gpu_workers.oom import cuda_self_check, is_cuda_oom
from gpu_workers.probe import NvmlProbe
from queues import Queue
from tests.gpu_workers.fake_nvml import H200_UUID, FakeNvml, h200_device
from tests.gpu_workers.fake_torch import OutOfMemoryError, make_fake_torch
from tests.gpu_workers.helpers import WorkerThread, make_spec
from tests.helpers import wait_until

GiB = 2**30
H200 = H200_UUID


@pytest.fixture
def torch(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    fake = make_fake_torch()
    monkeypatch.setitem(sys.modules, "torch", fake)
    yield fake


def test_is_cuda_oom() -> None:
    """torch's OOM class, PyTorch's message anywhere in the cause chain, and
    nothing else."""
    assert is_cuda_oom(OutOfMemoryError("whatever"))
    assert is_cuda_oom(RuntimeError("CUDA out of memory. Tried to allocate 2 GiB"))
    try:
        try:
            raise RuntimeError("CUDA error: out of memory")
        except RuntimeError as inner:
            raise ValueError("wrapped") from inner
    except ValueError as outer:
        assert is_cuda_oom(outer)
    assert not is_cuda_oom(RuntimeError("disk full"))
    assert not is_cuda_oom(None)


def test_self_check_uses_torch_when_loaded(torch: Any) -> None:
    """After an OOM: empty the cache and run a tiny kernel; a failure means
    CUDA is broken."""
    assert cuda_self_check(h200_device()) is True
    assert "empty_cache" in torch.calls and "ones" in torch.calls
    sys.modules["torch"] = make_fake_torch(broken=True)
    assert cuda_self_check(h200_device()) is False


def test_torch_handler_allocates_declared_and_steps(
    torch: Any, redis_url: str, qname: str, q: Queue
) -> None:
    """torch.matmul allocates ~90% of its declaration, runs matmuls step by
    step with progress, reports its own peak, and empties the cache."""
    nvml = FakeNvml("nvml_h200.json")
    nvml.set_process_memory(0, os.getpid(), 9 * GiB)
    spec = make_spec(
        redis_url, qname, gpu_uuid=H200, gpus="auto", budget_bytes=130 * GiB
    )
    worker = WorkerThread(spec, NvmlProbe(nvml))
    try:
        job = q.add(
            "torch.matmul", {"vram": "10GiB", "steps": 3, "n": 64, "matmuls": 2}
        )
        wait_until(lambda: q.get_job_state(job.id).value == "completed", what="job")
        done = q.get_job(job.id)
        assert done.progress == 100 and done.returnvalue["steps"] == 3
        held = done.returnvalue["allocated_bytes"]
        assert held == int(10 * GiB * 0.9)
        assert torch.calls.count("matmul") == 6 and "empty_cache" in torch.calls
        rec = wait_until(lambda: q.get_job_logs(job.id)[0], what="the log")
        assert any("vram: declared 10.0 GiB" in line for line in rec)

        # Memory held outside admission (another process) leaves less than
        # the declared need: the allocation meets a real CUDA OOM.
        sys.modules["torch"] = make_fake_torch(capacity=GiB // 2)
        over = q.add("torch.matmul", {"vram": "1GiB", "n": 64, "steps": 1})
        wait_until(lambda: q.get_job_state(over.id).value == "failed", what="OOM job")
        assert q.get_job(over.id).failed_reason == OOM_REASON
        assert worker.alive and worker.worker is not None
        assert worker.worker.counters["oom"] == 1 and worker.worker.exit_code == 0
    finally:
        worker.stop()


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ({"vram": "1GiB", "alloc": 200 * GiB}, "above its declared 1.0 GiB"),
        ({"vram": "1GiB", "n": 100_000}, "n=100000 needs"),
        ({"vram": "1GiB", "steps": 10**9}, "steps is 1000000000; expected 0..10000"),
        ({"vram": "1GiB", "matmuls": 10**6}, "matmuls is 1000000"),
        ({"vram": "1GiB", "host_s": 86_400}, "host_s is 86400"),
    ],
)
def test_torch_handler_refuses_data_beyond_its_declaration(
    torch: Any, redis_url: str, qname: str, q: Queue, data: Any, reason: str
) -> None:
    """Job data is untrusted: an allocation above the declared VRAM, matrices
    that do not fit in it, or unbounded steps fail the job at once (no retry)
    before torch allocates anything."""
    spec = make_spec(
        redis_url, qname, gpu_uuid=H200, gpus="auto", budget_bytes=130 * GiB
    )
    worker = WorkerThread(spec, NvmlProbe(FakeNvml("nvml_h200.json")))
    try:
        job = q.add("torch.matmul", data, attempts=3)
        wait_until(lambda: q.get_job_state(job.id).value == "failed", what="failure")
        done = q.get_job(job.id)
        assert reason in done.failed_reason and done.attempts_made == 1
        assert not [c for c in torch.calls if c.startswith("empty")]
    finally:
        worker.stop()
