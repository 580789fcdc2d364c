"""A job's declared VRAM before any GPU worker claimed it: what its handler
declares for its data, the way a worker computes it (handlers.py)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ..exceptions import ConfigError, HandlerNotFound
from ..handlers import REGISTRY, load_handler_modules

log = logging.getLogger("gpu_workers.waiting")

#: Handler module lists already imported (or found failing) in this process.
_loaded: set[tuple[str, ...]] = set()


def _load(modules: Sequence[str]) -> None:
    key = tuple(modules)
    if key not in _loaded:
        _loaded.add(key)
        try:
            load_handler_modules(key)
        except ConfigError as exc:
            log.warning("waiting reasons: %s", exc)


def job_model(name: str, data: Any, modules: Sequence[str]) -> str | None:
    """The model a job of `name` would use for `data` (HandlerRegistry.model_for:
    None for no handler here, no model, or data naming no valid model)."""
    _load(modules)
    return REGISTRY.model_for(name, data)


def declared_need(name: str, data: Any, modules: Sequence[str]) -> int | None:
    """The bytes the handler of job `name` declares for `data`, or None when
    no handler is known here or its declaration fails for this data."""
    _load(modules)
    try:
        entry = REGISTRY.get(name)
    except HandlerNotFound:
        return None
    try:
        return entry.declared_bytes(data)
    except Exception:  # noqa: BLE001 - a handler's own code on untrusted data
        return None
