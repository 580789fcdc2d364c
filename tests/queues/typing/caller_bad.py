"""Mistakes a caller makes with Queue, AsyncQueue and Job: mypy --strict
reports an error on each line whose comment starts with `E:` and on no
other line (tests/queues/test_typing.py checks it; never run)."""

from __future__ import annotations

from queues import AsyncQueue, Job, Queue


def sync_mistakes(queue: Queue) -> None:
    job = queue.add("resize", {})
    queue.get_job(job)  # E: a Job where its id (a str) is expected
    counts = queue.get_counts()
    print(counts["waiting"].foo)  # E: an int has no attribute foo
    state: str = queue.get_job(job.id).id  # E: get_job may return None
    logged: str = job.log("line")  # E: log returns the log's length (int)
    print(state, logged)


async def async_mistakes(queue: AsyncQueue) -> None:
    job: Job[AsyncQueue] = queue.add("resize", {})  # E: add's result not awaited
    print(queue.add("resize", {}).id)  # E: an awaitable has no id
    counts: dict[str, int] = queue.get_counts()  # E: get_counts not awaited
    print(job, counts)
    real = await queue.add("resize", {})
    progress: int = real.update_progress(5)  # E: an async job's action is awaitable
    print(progress)
