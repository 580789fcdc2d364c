"""The job page's attempts: gpu_workers/attempts.py on the pages' client."""

from __future__ import annotations

from gpu_workers.attempts import Attempts, first_line, job_attempts
from queues import Job

from . import gpu_fleet

__all__ = ["Attempts", "first_line", "attempts_of"]


def attempts_of(prefix: str, queue: str, job: Job, state: str) -> Attempts:
    """The attempts of `job` (in `state`): recorded, or derived from BullMQ."""
    return job_attempts(gpu_fleet(), prefix, queue, job, state)
