"""SupervisorConfig fields from the environment, for `python -m gpu_workers`
without Django (the GPU image): the same variables (REDIS_URL and the
BULLPEN_* rows of the GPU part of gpu_workers/settings.py's table) that
`bullpen runworkers` reads through the Django settings, so one ConfigMap
serves both. Flags and --config win over these."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .exceptions import ConfigError
from .settings import ROWS, Setting

#: The table's rows the GPU side reads from the environment.
GPU_ROWS: tuple[Setting, ...] = tuple(row for row in ROWS if row.part == "gpu")


def supervisor_field(row: Setting) -> str:
    """The SupervisorConfig field a GPU row fills."""
    return row.supervisor or row.attr


def env_values(environ: Mapping[str, str]) -> dict[str, Any]:
    """The SupervisorConfig fields the environment sets (empty values are
    unset); a value that does not parse is a ConfigError naming its variable."""
    values: dict[str, Any] = {}
    for row in GPU_ROWS:
        text = environ.get(row.name, "").strip()
        if not text:
            continue
        try:
            value = row.parse(text)
        except ValueError:
            raise ConfigError(f"{row.name}={text!r} is not a valid value") from None
        values[supervisor_field(row)] = (
            list(value) if isinstance(value, tuple) else value
        )
    return values
