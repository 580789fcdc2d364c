"""The manual rate limit (BullMQ's `queue.rateLimit(ms)` and
`Worker.RateLimitError()`): `Queue.rate_limit`, `get_rate_limit_ttl`,
`remove_rate_limit_key`, and a processor raising `RateLimitError`, which
gives its job back uncounted and holds the worker's claims until the limit
ends. Times are Redis's clock (stream entry ids, TIME), as the limiter's."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from queues import Job, Queue, RateLimitError, defaults
from queues.ops.queue_actions import MANUAL_LIMIT
from tests.helpers import wait_until
from tests.queues.worker.helpers import worker_thread
from tests.queues.worker.test_attempt_history import _records
from tests.queues.worker.test_move_to_wait import (
    GiveBackOnce,
    run_three_giving_back_job_1,
)

#: Stream ids and PTTL are whole ms: a limit may end this much before
#: its start + duration as read here.
CLOCK_SLACK_MS = 2
LIMIT_MS = 400


def _events(r: redis.Redis, q: Queue, event: str, job_id: str) -> list[int]:
    """When (Redis ms) each `event` of the job was emitted."""
    return [
        int(entry_id.split("-")[0])
        for entry_id, f in r.xrange(q.keys.events)
        if f.get("event") == event and f.get("jobId") == job_id
    ]


def _redis_ms(r: redis.Redis) -> int:
    seconds, micros = r.time()
    return int(seconds) * 1000 + int(micros) // 1000


def limit_once(via_queue: bool) -> GiveBackOnce:
    """Job "1"'s first run hits a rate limit: RateLimitError with
    `delay_ms`, or after `queue.rate_limit` when `via_queue`."""

    def why(job: Job) -> RateLimitError:
        if via_queue:
            job.queue.rate_limit(LIMIT_MS)
            return RateLimitError("upstream said 429")
        return RateLimitError("upstream said 429", delay_ms=LIMIT_MS)

    return GiveBackOnce({"1"}, why)


@pytest.mark.parametrize("via_queue", [False, True], ids=["delay_ms", "rate_limit"])
def test_a_rate_limited_job_goes_back_and_the_worker_waits_the_limit(
    redis_url: str, q: Queue, r: redis.Redis, via_queue: bool
) -> None:
    """Jobs 1-3 at concurrency 1, a worker without a limiter: job 1's first
    run raises RateLimitError. It goes back to the front, uncounted (no
    failure, no attempt), and the worker claims nothing until the limit
    ends: job 1's next start is LIMIT_MS or more after it went back, then 2
    and 3. Its attempt records say returned (the reason), then completed."""
    w = run_three_giving_back_job_1(redis_url, q, limit_once(via_queue))
    [back] = [
        int(entry_id.split("-")[0])
        for entry_id, f in r.xrange(q.keys.events)
        if f.get("event") == "waiting" and f.get("prev") == "active"
    ]
    starts = _events(r, q, "active", "1")
    assert len(starts) == 2
    # The limit starts when it is set: in the give-back's own script with
    # delay_ms, by a call of its own before it (after job 1 started) else.
    set_at = starts[0] if via_queue else back
    assert starts[1] >= set_at + LIMIT_MS - CLOCK_SLACK_MS, (set_at, back, starts)
    assert min(_events(r, q, "active", "2")) >= starts[1]
    assert w.worker.telemetry.counters["jobs_returned"] == 1
    assert w.worker.telemetry.counters["rate_limit_hits"] >= 1
    records = wait_until(
        lambda: (rs := _records(r, q, "1")) and len(rs) == 2 and rs,
        what="two attempt records",
    )
    assert [(a["outcome"], a.get("error")) for a in records] == [
        ("returned", "upstream said 429"),
        ("completed", None),
    ]


def test_a_raised_limit_is_waited_whole_past_the_claims_cap(
    redis_url: str, q: Queue, r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rate limit a claim answers is held RATE_LIMIT_MAX_DELAY_MS at most
    (the next claim reads it again); one a processor raised is held whole,
    as BullMQ's limitUntil: a worker without a limiter would not read it
    again. With the cap at 100 ms, job 1 restarts LIMIT_MS after."""
    monkeypatch.setattr(defaults, "RATE_LIMIT_MAX_DELAY_MS", 100)
    q.add("j", {}, attempts=1)
    proc = limit_once(via_queue=False)
    with worker_thread(q.name, proc, redis_url):
        wait_until(lambda: q.get_counts("completed")["completed"] == 1, 10)
    [back] = _events(r, q, "waiting", "1")[1:]
    starts = _events(r, q, "active", "1")
    assert starts[1] >= back + LIMIT_MS - CLOCK_SLACK_MS, (back, starts)


def test_a_worker_with_a_limiter_waits_a_limit_another_client_set(
    redis_url: str, q: Queue, r: redis.Redis
) -> None:
    """queue.rate_limit(ms) from a producer: an idle worker with a limiter
    (its own max far from reached) starts nothing until the limit ends."""
    with worker_thread(
        q.name, lambda job: job.id, redis_url, limiter={"max": 100, "duration": 1000}
    ):
        set_at = _redis_ms(r)
        q.rate_limit(LIMIT_MS)
        ids = [q.add("j", {}).id for _ in range(3)]
        wait_until(lambda: q.get_counts("completed")["completed"] == 3, 10)
    first = min(min(_events(r, q, "active", i)) for i in ids)
    assert first >= set_at + LIMIT_MS - CLOCK_SLACK_MS, (set_at, first)


def test_a_worker_without_a_limiter_does_not_wait_as_in_bullmq(
    redis_url: str, q: Queue
) -> None:
    """As BullMQ 6.7.0's moveToActive: the limiter is read only against a
    max (the worker's limiter or the queue's global rate limit), so a worker
    with neither runs jobs while a manual limit of a minute holds."""
    q.rate_limit(60_000)
    q.add("j", {})
    with worker_thread(q.name, lambda job: job.id, redis_url):
        wait_until(lambda: q.get_counts("completed")["completed"] == 1, 10)
    assert q.get_rate_limit_ttl() > 50_000


def test_rate_limit_ttl_reads_as_bullmq_does(q: Queue, r: redis.Redis) -> None:
    """get_rate_limit_ttl: no limiter -2; a manual limit its PTTL (with or
    without max_jobs); a count under max_jobs 0; the global rate limit's max
    used when max_jobs is not given; remove_rate_limit_key ends it."""
    assert q.get_rate_limit_ttl() == -2
    assert q.get_rate_limit_ttl(5) == 0
    q.rate_limit(5000)
    assert r.get(q.keys.limiter) == str(MANUAL_LIMIT)
    assert 4000 < q.get_rate_limit_ttl() <= 5000
    assert 4000 < q.get_rate_limit_ttl(5) <= 5000
    assert q.remove_rate_limit_key() == 1
    assert q.remove_rate_limit_key() == 0
    assert q.get_rate_limit_ttl() == -2
    r.set(q.keys.limiter, 3, px=5000)  # a window's count: 3 jobs so far
    assert q.get_rate_limit_ttl(5) == 0
    assert 4000 < q.get_rate_limit_ttl(3) <= 5000
    assert 4000 < q.get_rate_limit_ttl() <= 5000  # no max: the PTTL as it is
    q.set_global_rate_limit(4, 1000)
    assert q.get_rate_limit_ttl() == 0  # 3 < the global max 4
    r.incr(q.keys.limiter)
    assert 4000 < q.get_rate_limit_ttl() <= 5000
    r.persist(q.keys.limiter)
    assert q.get_rate_limit_ttl() == 0  # no expiry: nothing to wait for
    assert r.exists(q.keys.limiter) == 1


@pytest.mark.parametrize("bad", [0, -5, 1.5, "100", True, None])
def test_bad_rate_limits_are_refused(q: Queue, r: redis.Redis, bad: Any) -> None:
    with pytest.raises((TypeError, ValueError)):
        q.rate_limit(bad)
    with pytest.raises(ValueError):
        RateLimitError(delay_ms=bad if bad is not None else 0)
    if bad is not None:
        with pytest.raises(ValueError):
            q.get_rate_limit_ttl(bad)
    assert r.exists(q.keys.limiter) == 0
