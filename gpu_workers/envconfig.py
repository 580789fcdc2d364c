"""SupervisorConfig fields from the environment, for `python -m gpu_workers`
without Django (the GPU image): the same BULLPEN_* variables (and REDIS_URL)
that `bullpen runworkers` reads through the Django settings, so one ConfigMap
serves both. Flags and --config win over these."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .exceptions import ConfigError


def _modules(text: str) -> list[str]:
    return [m for m in text.split(",") if m]


#: Variable -> (SupervisorConfig field, parser of its text).
ENV_FIELDS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "REDIS_URL": ("redis_url", str),
    "BULLPEN_HOSTNAME": ("host", str),
    "BULLPEN_GPUS": ("gpus", str),
    "BULLPEN_WORKERS": ("queues", str),
    "BULLPEN_HANDLER_MODULES": ("handler_modules", _modules),
    "BULLPEN_NAMESPACE": ("namespace", str),
    "BULLPEN_VRAM_RESERVE": ("reserve_bytes", str),
    "BULLPEN_VRAM_CUDA_CONTEXT": ("context_bytes", str),
    "BULLPEN_VRAM_MARGIN": ("margin_bytes", str),
    "BULLPEN_MAX_RESTARTS": ("max_restarts", int),
    "BULLPEN_RESTART_WINDOW_S": ("restart_window_s", float),
    "BULLPEN_DRAIN_TIMEOUT_S": ("drain_timeout_s", float),
    "BULLPEN_HEARTBEAT_INTERVAL_S": ("heartbeat_interval_s", float),
    "BULLPEN_HEARTBEAT_TTL_S": ("heartbeat_ttl_s", float),
    "BULLPEN_METRICS_DATA_POINTS": ("metrics_data_points", int),
    "BULLPEN_GPU_TIME_HOURS_KEPT": ("gpu_time_hours_kept", int),
    "BULLPEN_GPU_TIME_DAYS_KEPT": ("gpu_time_days_kept", int),
    "BULLPEN_GPU_TIME_MAX_KEYS": ("gpu_time_max_keys", int),
}


def env_values(environ: Mapping[str, str]) -> dict[str, Any]:
    """The SupervisorConfig fields the environment sets (empty values are
    unset); a value that does not parse is a ConfigError naming its variable."""
    values: dict[str, Any] = {}
    for name, (field, parse) in ENV_FIELDS.items():
        text = environ.get(name, "").strip()
        if not text:
            continue
        try:
            values[field] = parse(text)
        except ValueError:
            raise ConfigError(f"{name}={text!r} is not a valid value") from None
    return values
