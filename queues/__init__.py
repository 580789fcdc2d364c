"""Bullpen's job-queue core: BullMQ 6's Redis protocol on redis-py."""

from __future__ import annotations

from .events import AsyncQueueEvents, QueueEvent, QueueEvents
from .exceptions import QueueError, UnrecoverableError
from .job import Job
from .keys import QueueKeys
from .queue import AsyncQueue, Queue
from .state import JobState
from .worker import AsyncWorker, Worker

__all__ = [
    "AsyncQueue",
    "AsyncQueueEvents",
    "AsyncWorker",
    "Job",
    "JobState",
    "Queue",
    "QueueError",
    "QueueEvent",
    "QueueEvents",
    "QueueKeys",
    "UnrecoverableError",
    "Worker",
]
