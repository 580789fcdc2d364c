"""Retries: attempts_made counting, each backoff kind (fixed, exponential,
jitter, a custom strategy, -1 meaning "no retry") and UnrecoverableError."""

from __future__ import annotations

import threading
import time
from typing import Any

import redis

from queues import Job, JobState, Queue, UnrecoverableError
from tests.helpers import wait_until
from tests.queues.worker.helpers import gaps, now_ms, worker_thread

#: How late an attempt may start after its backoff delay (idle worker): woken
#: by the retry's due time, not found by the worker's next look (drain_delay,
#: 5 s here). The rest is the machine's scheduling: within 50 ms on a quiet
#: 2-core VM, 499 ms at a 300 ms backoff once beside two busy loops
#: (2026-12-07). 1 s tells a wake at the due time from a later look.
LATENESS_MS = 1000


class Attempts:
    """A processor that fails until attempt `succeed_on` (never when 0) and
    records each attempt's processedOn, start and failure clock times and
    attempts_made."""

    def __init__(
        self, succeed_on: int = 0, error: type[Exception] = RuntimeError
    ) -> None:
        self.succeed_on = succeed_on
        self.error = error
        self.processed_on: dict[str, list[int]] = {}
        # Whole ms, the resolution of the worker's clock and of processedOn.
        self.clock: dict[str, list[int]] = {}
        self.failed_at: dict[str, list[int]] = {}
        self.attempts_seen: dict[str, list[int]] = {}
        self.lock = threading.Lock()

    def __call__(self, job: Job) -> Any:
        with self.lock:
            self.processed_on.setdefault(job.id, []).append(job.processed_on)
            self.clock.setdefault(job.id, []).append(now_ms())
            self.attempts_seen.setdefault(job.id, []).append(job.attempts_made)
            n = len(self.clock[job.id])
        if self.succeed_on and n >= self.succeed_on:
            return f"ok after {n}"
        with self.lock:
            self.failed_at.setdefault(job.id, []).append(now_ms())
        raise self.error(f"boom {n}")

    def waits(self, job_id: str) -> list[list[int]]:
        """Per retry, the time from the failed attempt to the next start, by
        the next processedOn and by the processor's clock."""
        fails = self.failed_at[job_id]
        return [
            # a final failure has no next start
            [b - a for a, b in zip(fails, starts[1:], strict=False)]
            for starts in (self.processed_on[job_id], self.clock[job_id])
        ]


def _finished(q: Queue, n: int, state: str = "failed") -> bool:
    return q.get_counts(state)[state] == n


def _check_gaps(proc: Attempts, job_id: str, expected: list[int]) -> None:
    """Each retry started `expected` ms (+ LATENESS_MS at most) after its
    attempt failed, and consecutive starts are at least that far apart."""
    for starts in (proc.processed_on[job_id], proc.clock[job_id]):
        assert len(starts) == len(expected) + 1, (starts, expected)
        assert all(g >= want for g, want in zip(gaps(starts), expected, strict=True)), (
            gaps(starts),
            expected,
        )
    for observed in proc.waits(job_id):
        assert len(observed) == len(expected), (observed, expected)
        for got, want in zip(observed, expected, strict=True):
            assert want <= got <= want + LATENESS_MS, (observed, expected)


def test_attempts_made_counts_and_immediate_retry(redis_url: str, q: Queue) -> None:
    """Without backoff a failed attempt is retried at once; attempts_made is
    the number of finished attempts, as seen by the processor and stored."""
    proc = Attempts(succeed_on=3)
    job = q.add("j", None, attempts=5)
    with worker_thread(q.name, proc, redis_url):
        wait_until(lambda: _finished(q, 1, "completed"), 10, what="completion")
    done = q.get_job(job.id)
    assert proc.attempts_seen[job.id] == [0, 1, 2]
    assert (done.attempts_made, done.attempts_started) == (3, 3)
    assert done.returnvalue == "ok after 3"
    assert done.failed_reason == "boom 2"
    assert len(done.stacktrace) == 2 and "RuntimeError: boom 2" in done.stacktrace[-1]


def test_attempts_exhausted_fails_with_last_reason(
    redis_url: str, q: Queue, r: redis.Redis
) -> None:
    """After `attempts` failures the job is failed with the last error, and
    `retries-exhausted` is emitted."""
    proc = Attempts()
    job = q.add("j", None, attempts=3)
    with worker_thread(q.name, proc, redis_url):
        wait_until(lambda: _finished(q, 1), 10, what="the failure")
    failed = q.get_job(job.id)
    assert failed.get_state() is JobState.FAILED
    assert (failed.attempts_made, failed.failed_reason) == (3, "boom 3")
    assert len(proc.clock[job.id]) == 3
    events = [f for _, f in r.xrange(q.keys.events) if f.get("jobId") == job.id]
    assert [
        e["event"] for e in events if e["event"] in ("failed", "retries-exhausted")
    ] == ["failed", "retries-exhausted"]
    assert events[-1]["attemptsMade"] == "3"


def test_fixed_backoff(redis_url: str, q: Queue) -> None:
    """Fixed backoff waits `delay` between attempts (a bare number too)."""
    proc = Attempts()
    a = q.add("fixed", None, attempts=3, backoff={"type": "fixed", "delay": 200})
    b = q.add("bare", None, attempts=3, backoff=150)
    with worker_thread(q.name, proc, redis_url, concurrency=2):
        wait_until(lambda: _finished(q, 2), 10, what="both failures")
    _check_gaps(proc, a.id, [200, 200])
    _check_gaps(proc, b.id, [150, 150])
    assert q.get_job(a.id).attempts_made == 3


def test_exponential_backoff(redis_url: str, q: Queue) -> None:
    """Exponential backoff waits delay, 2*delay, 4*delay."""
    proc = Attempts()
    job = q.add("exp", None, attempts=4, backoff={"type": "exponential", "delay": 100})
    with worker_thread(q.name, proc, redis_url):
        wait_until(lambda: _finished(q, 1), 10, what="the failure")
    _check_gaps(proc, job.id, [100, 200, 400])
    assert q.get_job(job.id).attempts_made == 4


def test_jitter_delay_is_within_range(redis_url: str, q: Queue) -> None:
    """With jitter j the stored backoff delay lies in [d*(1-j), d), varies
    between jobs, and applies to exponential backoff too."""
    proc = Attempts()
    fixed = q.add_bulk(
        [
            {
                "name": "fj",
                "opts": {
                    "attempts": 2,
                    "backoff": {"type": "fixed", "delay": 10_000, "jitter": 0.5},
                },
            }
            for _ in range(20)
        ]
    )
    expo = q.add_bulk(
        [
            {
                "name": "ej",
                "opts": {
                    "attempts": 3,
                    "backoff": {"type": "exponential", "delay": 8_000, "jitter": 0.25},
                },
            }
            for _ in range(10)
        ]
    )
    with worker_thread(q.name, proc, redis_url, concurrency=8):
        wait_until(
            lambda: q.get_counts("delayed")["delayed"] == 30,
            10,
            what="every job to wait for its retry",
        )
    fixed_delays = [q.get_job(j.id).delay for j in fixed]
    expo_delays = [q.get_job(j.id).delay for j in expo]
    assert all(5_000 <= d < 10_000 for d in fixed_delays), fixed_delays
    assert all(6_000 <= d < 8_000 for d in expo_delays), expo_delays
    assert len(set(fixed_delays)) > 10 and len(set(expo_delays)) > 5


def test_jitter_backoff_timing(redis_url: str, q: Queue) -> None:
    """Jittered retries really wait between d*(1-j) and d."""
    proc = Attempts()
    job = q.add(
        "j", None, attempts=4, backoff={"type": "fixed", "delay": 300, "jitter": 0.5}
    )
    with worker_thread(q.name, proc, redis_url):
        wait_until(lambda: _finished(q, 1), 10, what="the failure")
    for observed in proc.waits(job.id):
        assert len(observed) == 3
        assert all(150 <= g < 300 + LATENESS_MS for g in observed), observed


def test_custom_backoff_strategy(redis_url: str, q: Queue) -> None:
    """A custom backoff type is delayed by the worker's backoff_strategy,
    called with (attempts_made, type, error, job)."""
    calls: list[tuple[int, str, str, str, Any]] = []

    def strategy(attempts_made: int, kind: str, error: BaseException, job: Job) -> int:
        calls.append((attempts_made, kind, str(error), job.id, job.opts["backoff"]))
        return attempts_made * 150

    proc = Attempts(succeed_on=3)
    job = q.add("c", None, attempts=5, backoff={"type": "mine", "delay": 7})
    with worker_thread(q.name, proc, redis_url, backoff_strategy=strategy):
        wait_until(lambda: _finished(q, 1, "completed"), 10, what="completion")
    assert calls == [
        (1, "mine", "boom 1", job.id, {"type": "mine", "delay": 7}),
        (2, "mine", "boom 2", job.id, {"type": "mine", "delay": 7}),
    ]
    _check_gaps(proc, job.id, [150, 300])
    assert q.get_job(job.id).attempts_made == 3


def test_custom_backoff_minus_one_means_no_retry(redis_url: str, q: Queue) -> None:
    """A custom strategy returning -1 fails the job although attempts remain."""
    calls: list[int] = []

    def strategy(attempts_made: int, kind: str, error: BaseException, job: Job) -> int:
        calls.append(attempts_made)
        return -1

    proc = Attempts()
    job = q.add("c", None, attempts=5, backoff={"type": "mine"})
    with worker_thread(q.name, proc, redis_url, backoff_strategy=strategy):
        wait_until(lambda: _finished(q, 1), 10, what="the failure")
        time.sleep(0.2)  # no retry shows up
    failed = q.get_job(job.id)
    assert calls == [1]
    assert len(proc.clock[job.id]) == 1
    assert (failed.attempts_made, failed.failed_reason) == (1, "boom 1")
    assert q.get_counts("delayed", "waiting") == {"delayed": 0, "waiting": 0}


def test_unrecoverable_error_fails_at_once(redis_url: str, q: Queue) -> None:
    """UnrecoverableError fails the job without retry even with attempts left."""
    proc = Attempts(error=UnrecoverableError)
    job = q.add("u", None, attempts=5, backoff={"type": "fixed", "delay": 50})
    other = q.add("u2", None, attempts=5)
    with worker_thread(q.name, proc, redis_url):
        wait_until(lambda: _finished(q, 2), 10, what="the failures")
        time.sleep(0.2)
    for j in (job, other):
        failed = q.get_job(j.id)
        assert len(proc.clock[j.id]) == 1
        assert (failed.attempts_made, failed.failed_reason) == (1, "boom 1")
        assert failed.get_state() is JobState.FAILED
    assert q.get_counts("delayed", "waiting") == {"delayed": 0, "waiting": 0}


def test_each_failure_is_logged_with_what_happens_next(
    redis_url: str, q: Queue, caplog: Any
) -> None:
    """An operator reading the log sees whether a failed attempt is retried
    (and when), has no attempts left, or was unrecoverable."""
    fixed = q.add("fixed", None, attempts=2, backoff={"type": "fixed", "delay": 300})
    now = q.add("now", None, attempts=2)
    unrecoverable = q.add("u", None, attempts=5)

    def proc(job: Job) -> None:
        if job.name == "u":
            raise UnrecoverableError("bad input")
        raise RuntimeError("boom")

    with caplog.at_level("WARNING", logger="queues.worker"):
        with worker_thread(q.name, proc, redis_url, concurrency=3):
            wait_until(lambda: _finished(q, 3), 10, what="three failures")
    lines = [
        r.getMessage() for r in caplog.records if "failed on attempt" in r.getMessage()
    ]
    expected = [
        f"job {fixed.id} (fixed) failed on attempt 1 of 2 (retrying in 0.3 s)",
        f"job {fixed.id} (fixed) failed on attempt 2 of 2 (no attempts left)",
        f"job {now.id} (now) failed on attempt 1 of 2 (retrying now)",
        f"job {now.id} (now) failed on attempt 2 of 2 (no attempts left)",
        f"job {unrecoverable.id} (u) failed on attempt 1 of 5 "
        "(unrecoverable, not retried): UnrecoverableError: bad input",
    ]
    for start in expected:
        assert any(line.startswith(start) for line in lines), (start, lines)
