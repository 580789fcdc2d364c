"""The mixed job set of interop points 1 and 2, and the order checks both
directions share."""

from __future__ import annotations

import random
from typing import Any

#: Options as Node writes them -> `Queue.add` keyword arguments.
NODE_TO_PY = {
    "priority": "priority",
    "delay": "delay",
    "lifo": "lifo",
    "jobId": "job_id",
    "attempts": "attempts",
    "backoff": "backoff",
    "removeOnComplete": "remove_on_complete",
}


def mixed_jobs(count: int, seed: int = 7) -> list[dict[str, Any]]:
    """count jobs {name, data, opts (Node names)}: a third prioritized (1-5),
    a tenth delayed, a tenth lifo, a tenth with custom ids, every 7th failing
    its first attempt (3 attempts, exponential backoff), every 11th removed on
    completion."""
    rng = random.Random(seed)
    jobs = []
    for i in range(count):
        kind = i % 10
        opts: dict[str, Any] = {}
        data: dict[str, Any] = {"n": i}
        if kind in (0, 1, 2):
            opts["priority"] = rng.randint(1, 5)
        elif kind == 3:
            opts["delay"] = rng.randint(50, 400)
        elif kind == 4:
            opts["lifo"] = True
        elif kind == 5:
            opts["jobId"] = f"custom-{i}"
        if i % 7 == 0:
            data["failFirst"] = True
            opts["attempts"] = 3
            opts["backoff"] = {"type": "exponential", "delay": 20}
        if i % 11 == 0:
            opts["removeOnComplete"] = True
        jobs.append({"name": f"kind{kind}", "data": data, "opts": opts})
    return jobs


def py_kwargs(opts: dict[str, Any]) -> dict[str, Any]:
    """Node option names as `Queue.add` keyword arguments."""
    return {NODE_TO_PY[k]: v for k, v in opts.items()}


def check_order(
    specs: list[dict[str, Any]], ids: list[str], starts: list[tuple[str, int]]
) -> None:
    """With one worker at concurrency 1 and every job added before it started:
    first attempts of the jobs waiting at the start run lifo ones first (newest
    first), then FIFO ones in add order, all before any prioritized job; the
    prioritized run by priority then add order. Retries and delayed jobs join
    later and are left out."""
    spec_of = dict(zip(ids, specs, strict=True))
    position = {job_id: i for i, job_id in enumerate(ids)}
    first = [job_id for job_id, attempt in starts if attempt == 0]
    waiting = [
        j
        for j in first
        if not spec_of[j]["opts"].get("delay")
        and not spec_of[j]["opts"].get("priority")
    ]
    prioritized = [j for j in first if spec_of[j]["opts"].get("priority")]
    lifo = [j for j in waiting if spec_of[j]["opts"].get("lifo")]
    fifo = [j for j in waiting if not spec_of[j]["opts"].get("lifo")]
    assert waiting == lifo + fifo, "lifo jobs must run before FIFO ones"
    assert lifo == sorted(lifo, key=position.__getitem__, reverse=True)
    assert fifo == sorted(fifo, key=position.__getitem__)
    assert max(first.index(j) for j in waiting) < min(
        first.index(j) for j in prioritized
    )
    keys = [(spec_of[j]["opts"]["priority"], position[j]) for j in prioritized]
    assert keys == sorted(keys), "prioritized jobs must run by priority, then FIFO"
