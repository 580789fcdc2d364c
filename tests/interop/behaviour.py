"""The job behaviour both languages' test workers share (see node/bull.mjs):
driven by the job's data so either side can produce the jobs."""

from __future__ import annotations

import asyncio
from typing import Any

from queues import Job, RateLimitError


async def behave(job: Job, name: str) -> Any:
    """rateLimitMs (first start only: the queue rate limited that long, the
    job given back), hangMs (first start only), sleepMs, progress [...],
    failFirst, fail "<msg>", parent -> children's values, else {id, by,
    double}."""
    data = job.data if isinstance(job.data, dict) else {}
    if data.get("rateLimitMs") and job.attempts_started <= 1:
        raise RateLimitError(delay_ms=int(data["rateLimitMs"]))
    if data.get("hangMs") and job.attempts_started <= 1:
        await asyncio.sleep(data["hangMs"] / 1000)
    if data.get("sleepMs"):
        await asyncio.sleep(data["sleepMs"] / 1000)
    for progress in data.get("progress", []):
        await job.update_progress(progress)
    if data.get("failFirst") and job.attempts_made == 0:
        raise RuntimeError("first attempt fails")
    if data.get("fail"):
        raise RuntimeError(data["fail"])
    if data.get("parent"):
        return await job.get_children_values()
    return {"id": job.id, "by": name, "double": data.get("n", 0) * 2}
