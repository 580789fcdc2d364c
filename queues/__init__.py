"""Bullpen's job-queue core: BullMQ 6's Redis protocol on redis-py."""

from __future__ import annotations

from .attempts import AttemptHistory
from .durability import Durability
from .events import AsyncQueueEvents, QueueEvent, QueueEvents
from .exceptions import (
    InvalidJobId,
    MoveToWait,
    NotDurable,
    QueueError,
    RateLimitError,
    RedisUnavailable,
    UnrecoverableError,
)
from .flow import AsyncFlowProducer, FlowProducer, JobNode
from .job import Job
from .keys import QueueKeys
from .metrics import Metrics, MetricsMeta, MetricsOptions
from .queue import AsyncQueue, Queue
from .scheduler import JobScheduler
from .state import JobState
from .worker import AsyncWorker, Worker

__all__ = [
    "AsyncFlowProducer",
    "AsyncQueue",
    "AsyncQueueEvents",
    "AsyncWorker",
    "AttemptHistory",
    "Durability",
    "FlowProducer",
    "InvalidJobId",
    "Job",
    "JobNode",
    "JobScheduler",
    "JobState",
    "Metrics",
    "MetricsMeta",
    "MetricsOptions",
    "MoveToWait",
    "NotDurable",
    "Queue",
    "QueueError",
    "QueueEvent",
    "QueueEvents",
    "QueueKeys",
    "RateLimitError",
    "RedisUnavailable",
    "UnrecoverableError",
    "Worker",
]
