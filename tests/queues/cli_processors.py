"""Processors the CLI tests load with `--processor tests.queues.cli_processors:NAME`."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from queues import Job

#: Not callable: `--processor ...:NOT_CALLABLE` must be refused.
NOT_CALLABLE = 42


def double(job: Job) -> dict[str, Any]:
    """Return twice `x`; fail (a multi-line message) when the job's data says so."""
    if job.data.get("fail"):
        raise ValueError(f"boom on {job.data['x']}\nsecond line of the message")
    return {"doubled": job.data["x"] * 2}


async def async_double(job: Job) -> int:
    """The asyncio twin of `double` without failures."""
    await asyncio.sleep(0)
    return int(job.data["x"]) * 2


def slow(job: Job) -> str:
    """Sleep for `seconds` of the job's data, then complete."""
    time.sleep(float(job.data.get("seconds", 1)))
    return "slept"


class Namespace:
    """Holds a processor one attribute deep, for a dotted `module:Class.attr` path."""

    process = staticmethod(double)
