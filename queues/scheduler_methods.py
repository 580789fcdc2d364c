"""`JobSchedulerMethods`: the job scheduler methods of `Queue` and
`AsyncQueue`, over the operations of `queues.scheduler`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from .driver import Driver, op_method
from .job import Job
from .ops import Cmd, Op, now_ms
from .reads import MakesJobs
from .scheduler import (
    JobScheduler,
    count,
    get_many,
    get_one,
    next_iteration,
    remove,
    upsert,
)

Q = TypeVar("Q", bound=Driver)


class JobSchedulerMethods(MakesJobs[Q]):
    """The job scheduler methods of `Queue` and `AsyncQueue`."""

    _job_defaults: dict[str, Any]

    @op_method
    def upsert_job_scheduler(
        self,
        scheduler_id: str,
        *,
        every_ms: int | None = None,
        cron: str | None = None,
        tz: str | None = None,
        limit: int | None = None,
        start_date: Any = None,
        end_date: Any = None,
        offset_ms: int | None = None,
        template: Mapping[str, Any] | None = None,
    ) -> Op[Job[Q] | None]:
        """Create or replace a job scheduler (every `every_ms` or on a `cron`
        pattern) from a template {name, data, opts}; returns its next
        iteration's Job, or None when `limit` allows none."""
        added = upsert(
            self.keys,
            scheduler_id,
            now_ms(),
            every_ms=every_ms,
            cron=cron,
            tz=tz,
            limit=limit,
            start_date=start_date,
            end_date=end_date,
            offset_ms=offset_ms,
            template=dict(template or {}),
            queue_defaults=self._job_defaults,
        )
        return self._first_iteration(added)

    def _first_iteration(self, added: Op[tuple[str, int] | None]) -> Op[Job[Q] | None]:
        iteration = yield from added
        if iteration is None:
            return None
        h = yield Cmd(("HGETALL", self.keys.job(iteration[0])))
        return self._job(iteration[0], h) if h else None

    @op_method
    def remove_job_scheduler(self, scheduler_id: str) -> Op[bool]:
        """Delete a job scheduler and its delayed next iteration; False if unknown."""
        return remove(self.keys, scheduler_id)

    @op_method
    def get_job_scheduler(self, scheduler_id: str) -> Op[JobScheduler | None]:
        """One JobScheduler, or None."""
        return get_one(self.keys, scheduler_id)

    @op_method
    def get_job_schedulers(
        self, start: int = 0, end: int = -1, asc: bool = False
    ) -> Op[list[JobScheduler]]:
        """JobSchedulers ordered by their next run (latest first unless asc)."""
        return get_many(self.keys, start, end, asc)

    @op_method
    def get_job_schedulers_count(self) -> Op[int]:
        """How many job schedulers the queue has (Node's getJobSchedulersCount)."""
        return count(self.keys)

    @op_method
    def schedule_next_iteration(self, job: Job[Any]) -> Op[str | None]:
        """Add the iteration after a scheduler's job (workers call this when they
        take one, as Node's worker does); returns the new id or None."""
        if not job.repeat_job_key:
            return _nothing()
        return next_iteration(
            self.keys, job.id, job.repeat_job_key, job.raw.get("opts"), now_ms()
        )


def _nothing() -> Op[None]:
    return None
    yield  # pragma: no cover - makes this a generator
