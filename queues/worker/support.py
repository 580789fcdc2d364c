"""What the worker's parts share: the logger, safe text, naming."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..clients import worker_connection_name
from ..job import Job

log = logging.getLogger("queues.worker")

Processor = Callable[[Job], Any]


def _text(value: str) -> str:
    """`value` made encodable as UTF-8 (a lone surrogate, as from undecodable
    bytes, becomes a \\udcxx escape), so the failure it describes can be saved."""
    return value.encode("utf-8", "backslashreplace").decode("utf-8")


def blocking_connection_name(prefix: str, queue: str, worker_name: str | None) -> str:
    """BullMQ's name for a worker connection, which Node's getWorkers() lists."""
    return worker_connection_name(prefix, queue, worker_name)
