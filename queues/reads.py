"""Reading jobs for display: a job or a page of jobs, each with the state
that held it read in the same atomic step (`get_job_hashes.lua`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Generic, TypeVar

from . import ops
from .driver import Driver, op_method
from .job import Job
from .keys import QueueKeys
from .state import JobState

Q = TypeVar("Q", bound=Driver)


class MakesJobs(Generic[Q]):
    """What the queue's mixins share: its keys, its driver, and making the
    `Job` objects it hands out (bound to that driver)."""

    keys: QueueKeys

    @property
    def driver(self) -> Q:
        """What runs this queue's ops (the queue itself, see queues.driver)."""
        raise NotImplementedError

    def _job(
        self,
        job_id: str,
        h: Mapping[str, str],
        left_out: dict[str, int] | None = None,
    ) -> Job[Q]:
        return Job.from_hash(self.driver, job_id, dict(h), left_out)


class JobReads(MakesJobs[Q]):
    """The job reads of `Queue` and `AsyncQueue` (mixed into their base)."""

    @op_method
    def get_job(
        self, job_id: str, max_value_bytes: int | None = None
    ) -> ops.Op[Job[Q] | None]:
        """The job with this id, or None. With `max_value_bytes`, fields whose
        value is longer are not read (see Job.left_out): for showing jobs
        whose data may be megabytes."""
        return _first(self._with_state(job_id, max_value_bytes, False))

    @op_method
    def get_job_with_state(
        self, job_id: str, max_value_bytes: int | None = None
    ) -> ops.Op[tuple[Job[Q] | None, JobState]]:
        """(Job or None, JobState), both read in one atomic step, so the state
        always matches the fields shown beside it (a "completed" job has its
        return value); `max_value_bytes` as get_job."""
        return self._with_state(job_id, max_value_bytes, True)

    def _with_state(
        self, job_id: str, max_value_bytes: int | None, with_state: bool
    ) -> ops.Op[tuple[Job[Q] | None, JobState]]:
        [read] = yield from ops.get_job_hashes(
            self.keys, [job_id], max_value_bytes, with_state
        )
        if not (read.fields or read.left_out):
            return None, read.state
        return self._job(job_id, read.fields, read.left_out), read.state

    @op_method
    def get_jobs(
        self,
        states: Sequence[str | JobState] | str | JobState = (),
        start: int = 0,
        end: int = -1,
        asc: bool = False,
        max_value_bytes: int | None = None,
    ) -> ops.Op[list[Job[Q]]]:
        """One page of jobs across states, reading only that page from Redis
        (with `max_value_bytes`, as get_job: long values left out)."""
        return _jobs(self._page(states, start, end, asc, max_value_bytes, False))

    @op_method
    def get_jobs_with_states(
        self,
        states: Sequence[str | JobState] | str | JobState = (),
        start: int = 0,
        end: int = -1,
        asc: bool = False,
        max_value_bytes: int | None = None,
    ) -> ops.Op[list[tuple[Job[Q], JobState]]]:
        """get_jobs as (Job, JobState) pairs, each state read in the same atomic
        step as the job's fields (which costs an LPOS over `wait` per waiting
        job: get_jobs when the states are not shown)."""
        return self._page(states, start, end, asc, max_value_bytes, True)

    def _page(
        self,
        states: Sequence[str | JobState] | str | JobState,
        start: int,
        end: int,
        asc: bool,
        max_value_bytes: int | None,
        with_state: bool,
    ) -> ops.Op[list[tuple[Job[Q], JobState]]]:
        if isinstance(states, (str, JobState)):
            states = [states]
        ids = yield from ops.page_ids(self.keys, states, start, end, asc)
        if not ids:
            return []
        found = yield from ops.get_job_hashes(
            self.keys, ids, max_value_bytes, with_state
        )
        return [
            (self._job(i, read.fields, read.left_out), read.state)
            for i, read in zip(ids, found)
            if read.fields or read.left_out
        ]


def _first(op: ops.Op[tuple[Job[Q] | None, JobState]]) -> ops.Op[Job[Q] | None]:
    job, _ = yield from op
    return job


def _jobs(op: ops.Op[list[tuple[Job[Q], JobState]]]) -> ops.Op[list[Job[Q]]]:
    rows = yield from op
    return [job for job, _ in rows]
