"""A child whose process exits EXIT_RECYCLE (VRAM it could not give back kept
its jobs out, gpu_workers/residency.py) restarts at once, not as a crash,
unless it recycles more than `max_restarts` times within `restart_window_s`
(a leak at every load): then each one more counts as a crash (backoff, then
FAILED). The whole path on a simulated GPU: tests/gpu_workers/test_residency.py."""

from __future__ import annotations

import argparse

from gpu_workers import defaults
from gpu_workers.__main__ import build_config
from gpu_workers.children import Child, ChildState
from gpu_workers.config import SupervisorConfig
from gpu_workers.probe.base import GpuInfo


def _config(**env: str) -> SupervisorConfig:
    names = ("redis_url", "host", "gpus", "workers", "handler_modules", "log_dir")
    values: dict[str, str | None] = dict.fromkeys(names)
    values.update(log_format=None, liveness_file=None, config=None)
    base = {"REDIS_URL": "redis://h", "BULLPEN_WORKERS": "render:1", **env}
    return build_config(argparse.Namespace(**values), base)


def test_recycles_restart_at_once_until_too_many_in_the_window() -> None:
    cfg = _config(BULLPEN_MAX_RESTARTS="2", BULLPEN_RESTART_WINDOW_S="60")
    gpu = GpuInfo(0, "GPU-1", "sim", "0", 24 << 30, simulated=True)
    child = Child(cfg.queues[0], gpu, 20 << 30)
    code = defaults.EXIT_RECYCLE
    for now in (100.0, 110.0):
        assert child.recycled(code, now, cfg) is False
        assert child.state is ChildState.BACKOFF and child.restart_at == now
        assert "restarting now" in child.reason
    assert not child.crashes
    # A third within 60 s: a crash (a delay before the restart).
    assert child.recycled(code, 120.0, cfg) is False
    assert child.state is ChildState.BACKOFF and child.restart_at > 120.0
    assert "recycled 3 times within 60s" in child.reason
    assert len(child.crashes) == 1
    # Out of the window, a recycle restarts at once again.
    assert child.recycled(code, 400.0, cfg) is False
    assert child.restart_at == 400.0
    # A leak at every load: recycles count as crashes until FAILED.
    for now in (401.0, 402.0, 403.0, 404.0):
        failed = child.recycled(code, now, cfg)
    assert failed is True and child.state is ChildState.FAILED
    assert "gave up" in child.reason
