"""`python -m gpu_workers` configured by the environment alone (the GPU
image's CMD, no Django): REDIS_URL and the BULLPEN_* variables fill what the
flags and --config leave unset."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_workers import Fleet
from gpu_workers.__main__ import build_config
from gpu_workers.exceptions import ConfigError
from queues import Queue
from tests.helpers import wait_until

REPO = Path(__file__).resolve().parents[2]


def _args(**given: str) -> argparse.Namespace:
    names = ("redis_url", "host", "gpus", "workers", "handler_modules", "log_dir")
    values: dict[str, str | None] = dict.fromkeys(names)
    values.update(log_format=None, liveness_file=None, config=None)
    values.update(given)
    return argparse.Namespace(**values)


def test_the_environment_fills_what_flags_leave_unset() -> None:
    env = {
        "REDIS_URL": "redis://r.internal:6379/2",
        "BULLPEN_HOSTNAME": "gpu-pod-7",
        "BULLPEN_GPUS": "sim:2x24GiB",
        "BULLPEN_WORKERS": "render:2,embed:4",
        "BULLPEN_HANDLER_MODULES": "myapp.handlers,gpu_workers.demo_handlers",
        "BULLPEN_VRAM_RESERVE": "2GiB",
        "BULLPEN_DRAIN_TIMEOUT_S": "75",
        "BULLPEN_MAX_RESTARTS": "9",
        "BULLPEN_HEARTBEAT_TTL_S": "",  # empty: the default
    }
    config = build_config(_args(host="flag-host"), env)
    assert config.redis_url == "redis://r.internal:6379/2"
    assert config.host == "flag-host"  # a flag wins
    assert config.gpus == "sim:2x24GiB"
    assert [(q.queue, q.slots) for q in config.queues] == [("render", 2), ("embed", 4)]
    assert config.handler_modules == ["myapp.handlers", "gpu_workers.demo_handlers"]
    assert config.reserve_bytes == 2 * 2**30
    assert config.drain_timeout_s == 75.0
    assert config.max_restarts == 9
    assert (
        config.heartbeat_ttl_s == build_config(_args(redis_url="x"), {}).heartbeat_ttl_s
    )


def test_a_bad_value_names_its_variable() -> None:
    with pytest.raises(ConfigError, match="BULLPEN_MAX_RESTARTS='many'"):
        build_config(
            _args(), {"REDIS_URL": "redis://h", "BULLPEN_MAX_RESTARTS": "many"}
        )
    with pytest.raises(ConfigError, match="REDIS_URL"):
        build_config(_args(), {})


def test_the_gpu_image_command_works_from_the_environment_alone(
    redis_url: str, q: Queue, tmp_path: Path
) -> None:
    """No flags: the supervisor reads its Redis, GPUs, queues and host from
    the environment, and its worker completes a job."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("BULLPEN_", "DJANGO_")) and key != "REDIS_URL"
    }
    env.update(
        REDIS_URL=redis_url,
        BULLPEN_GPUS="sim:1x24GiB",
        BULLPEN_WORKERS=f"{q.name}:1",
        BULLPEN_HOSTNAME="env-only-host",
        BULLPEN_LIVENESS_FILE=str(tmp_path / "alive"),
    )
    log = open(tmp_path / "supervisor.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpu_workers"],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        job = q.add("demo", {"vram": "1GiB", "steps": 1, "step_s": 0.01})
        wait_until(
            lambda: q.get_job_state(job.id) == "completed",
            timeout=30,
            what="the job to complete",
        )
        assert (tmp_path / "alive").exists()
        fleet = Fleet(redis_url)
        workers = fleet.list_workers()
        fleet.close()
        assert [(w["host"], w["queue"]) for w in workers] == [("env-only-host", q.name)]
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


def test_worker_processes_find_a_checkout_but_not_site_packages_first() -> None:
    """From a checkout the children get it on PYTHONPATH; installed, the
    venv's site-packages is not put there (it would come before the standard
    library)."""
    import sysconfig

    from gpu_workers.children import REPO_ROOT, child_pythonpath

    assert child_pythonpath("") == str(REPO_ROOT)
    assert child_pythonpath("/opt/x") == f"{REPO_ROOT}{os.pathsep}/opt/x"
    installed = Path(sysconfig.get_paths()["purelib"])
    assert installed.name == "site-packages"
    assert child_pythonpath("", installed) == ""
    assert child_pythonpath("/opt/x", installed) == "/opt/x"
