"""Correct use of Queue, AsyncQueue and Job: mypy --strict finds nothing here
(tests/queues/test_typing.py checks it; never run, so no Redis needed)."""

from __future__ import annotations

from collections.abc import Awaitable

from queues import AsyncQueue, Job, JobState, Queue


def sync_caller(queue: Queue) -> None:
    job: Job[Queue] = queue.add("resize", {"w": 10}, priority=2)
    job_id: str = job.id
    counts: dict[str, int] = queue.get_counts()
    waiting: int = counts["waiting"] + 1
    found: Job[Queue] | None = queue.get_job(job_id)
    if found is not None:
        state: JobState = found.get_state()
        length: int = found.log("a line")
        found.update_progress(50)
        print(state, length)
    jobs: list[Job[Queue]] = queue.get_jobs(["waiting", JobState.DELAYED], 0, 9)
    removed: bool = queue.remove_job(job_id)
    queue.pause()
    paused: bool = queue.is_paused()
    lines, total = queue.get_job_logs(job_id)
    print(waiting, jobs, removed, paused, lines[:total])


async def async_caller(queue: AsyncQueue) -> None:
    pending: Awaitable[Job[AsyncQueue]] = queue.add("resize", {"w": 10})
    job = await pending
    job_id: str = job.id
    counts: dict[str, int] = await queue.get_counts("waiting")
    found, state = await queue.get_job_with_state(job_id)
    if found is not None:
        await found.update_progress({"pct": 5})
        length: int = await found.log("a line")
        current: JobState = await found.get_state()
        print(length, current)
    bulk: list[Job[AsyncQueue]] = await queue.add_bulk([{"name": "a"}])
    await queue.resume()
    print(counts["waiting"], state, bulk)


def any_job(job: Job) -> str:
    """A plain `Job` (either kind) is fine where only its fields are read."""
    return f"{job.id}: {job.name}"
