"""Placement's settings (BULLPEN_PLACEMENT*): parsed from the environment,
checked by SupervisorConfig, and handed to each worker process's spec."""

from __future__ import annotations

import argparse

import pytest

from gpu_workers import children
from gpu_workers.__main__ import build_config
from gpu_workers.config import QueueConfig, SupervisorConfig, WorkerSpec
from gpu_workers.exceptions import ConfigError
from gpu_workers.probe.base import GpuInfo
from gpu_workers.settings import on_off


def _args() -> argparse.Namespace:
    names = ("redis_url", "host", "gpus", "workers", "handler_modules", "log_dir")
    values: dict[str, str | None] = dict.fromkeys(names)
    values.update(log_format=None, liveness_file=None, config=None)
    return argparse.Namespace(**values)


ENV = {"REDIS_URL": "redis://h", "BULLPEN_WORKERS": "render:2"}


def spec_of(config: SupervisorConfig) -> WorkerSpec:
    gpu = GpuInfo(0, "GPU-1", "sim", "0", 24 << 30, simulated=True)
    q = config.queues[0]
    return children.spec_of(children.Child(q, gpu, 20 << 30), config, q, 2)


def test_defaults_reach_the_worker_spec() -> None:
    """On, 60 s, 2 s, 16 jobs unless set; the spec carries them (and its
    command-line form keeps them)."""
    spec = spec_of(build_config(_args(), ENV))
    assert (spec.placement, spec.placement_age_bound_s) == (True, 60.0)
    assert (spec.placement_cold_hold_s, spec.placement_scan) == (2.0, 16)
    again = WorkerSpec.from_json(spec.to_json())
    assert again == spec


def test_the_environment_sets_them() -> None:
    env = {
        **ENV,
        "BULLPEN_PLACEMENT": "off",
        "BULLPEN_PLACEMENT_AGE_BOUND_S": "30",
        "BULLPEN_PLACEMENT_COLD_HOLD_S": "0.5",
        "BULLPEN_PLACEMENT_SCAN": "4",
    }
    spec = spec_of(build_config(_args(), env))
    assert spec.placement is False
    assert spec.placement_age_bound_s == 30.0
    assert spec.placement_cold_hold_s == 0.5
    assert spec.placement_scan == 4


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("BULLPEN_PLACEMENT", "maybe", "BULLPEN_PLACEMENT='maybe'"),
        ("BULLPEN_PLACEMENT_AGE_BOUND_S", "0", "BULLPEN_PLACEMENT_AGE_BOUND_S"),
        ("BULLPEN_PLACEMENT_COLD_HOLD_S", "61", "BULLPEN_PLACEMENT_COLD_HOLD_S"),
        ("BULLPEN_PLACEMENT_COLD_HOLD_S", "-1", "BULLPEN_PLACEMENT_COLD_HOLD_S"),
        ("BULLPEN_PLACEMENT_SCAN", "0", "BULLPEN_PLACEMENT_SCAN"),
        ("BULLPEN_PLACEMENT_SCAN", "1001", "BULLPEN_PLACEMENT_SCAN"),
        ("BULLPEN_PLACEMENT_SCAN", "many", "BULLPEN_PLACEMENT_SCAN='many'"),
    ],
)
def test_a_bad_value_is_refused_naming_it(
    variable: str, value: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        build_config(_args(), {**ENV, variable: value})


def test_on_off_reads_the_usual_spellings() -> None:
    assert [on_off(v) for v in ("on", "ON", "1", "true", "yes")] == [True] * 5
    assert [on_off(v) for v in ("off", "Off", "0", "false", "no")] == [False] * 5
    with pytest.raises(ValueError, match="on or off"):
        on_off("o")


def test_supervisor_config_checks_types() -> None:
    """A JSON --config may hold anything: wrong types are refused too."""
    queues = [QueueConfig("render")]
    with pytest.raises(ConfigError, match="BULLPEN_PLACEMENT must be on or off"):
        SupervisorConfig("redis://h", queues, placement="yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="BULLPEN_PLACEMENT_SCAN must be an int"):
        SupervisorConfig("redis://h", queues, placement_scan=2.5)  # type: ignore[arg-type]
