"""`manage.py runworkers` only turns settings into a SupervisorConfig."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from gpu_workers.config import SupervisorConfig


@override_settings(
    BULLPEN_GPUS="sim:2x24GiB",
    BULLPEN_WORKERS="txt2img:2,video:1",
    BULLPEN_HOSTNAME="node-7",
    BULLPEN_VRAM_MARGIN="2GiB",
    BULLPEN_MAX_RESTARTS=3,
    BULLPEN_LOG_FORMAT="json",
    BULLPEN_LIVENESS_FILE="/run/bullpen/supervisor.alive",
    REDIS_URL="redis://127.0.0.1:1/0",
)
def test_runworkers_hands_settings_to_the_supervisor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every BULLPEN_* setting reaches the supervisor's config unchanged."""
    seen: list[SupervisorConfig] = []

    def fake_run(config: SupervisorConfig, install_signals: bool = True) -> int:
        seen.append(config)
        return 0

    monkeypatch.setattr(
        "dashboard.console.management.commands.runworkers.run_supervisor", fake_run
    )
    call_command("runworkers")
    [config] = seen
    assert (config.host, config.gpus, config.redis_url) == (
        "node-7",
        "sim:2x24GiB",
        "redis://127.0.0.1:1/0",
    )
    assert [(q.queue, q.slots) for q in config.queues] == [("txt2img", 2), ("video", 1)]
    assert config.margin_bytes == 2 * 2**30 and config.max_restarts == 3
    assert "gpu_workers.torch_handlers" in config.handler_modules
    assert config.log_format == "json"
    assert config.liveness_file == "/run/bullpen/supervisor.alive"


@override_settings(BULLPEN_WORKERS='[{"queue": "bad:name"}]')
def test_runworkers_rejects_bad_settings() -> None:
    """Misconfiguration is a CommandError naming the problem, not a traceback."""
    with pytest.raises(CommandError, match="queue name"):
        call_command("runworkers", "--check")


@override_settings(BULLPEN_LOG_FORMAT="xml")
def test_runworkers_rejects_an_unknown_log_format() -> None:
    """Refused at start, not by every worker process crashing on it."""
    with pytest.raises(CommandError, match="log format"):
        call_command("runworkers", "--check")


def test_runworkers_check_prints_the_plan() -> None:
    """--check validates and prints without starting anything."""
    out = StringIO()
    call_command(
        "runworkers", "--check", "--gpus", "sim:1x8GiB", "--host", "h", stdout=out
    )
    assert "host h, GPUs sim:1x8GiB, queues bull:gpu (3 slots)" in out.getvalue()
