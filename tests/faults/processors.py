"""The processor the fault tests' worker processes run."""

from __future__ import annotations

import time
from typing import Any

from queues import Job


def work(job: Job) -> Any:
    """Sleep `ms` of the job's data, then return the job's id."""
    time.sleep(float(job.data.get("ms", 0)) / 1000)
    return job.id
