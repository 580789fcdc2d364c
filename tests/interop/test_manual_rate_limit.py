"""The manual rate limit across languages (BullMQ 6.7.0's `queue.rateLimit`,
`getRateLimitTtl`, `Worker.RateLimitError()`): a limit either side sets holds
the other side's workers, a job given back for a rate limit by either side's
processor runs once the limit ends, and both read the limit alike. Times are
Redis's clock (stream entry ids, TIME)."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import pytest
import redis

from queues import Queue
from tests.helpers import wait_until

from .helpers import call, node_worker, python_worker

#: Stream ids and PTTL are whole ms.
CLOCK_SLACK_MS = 2
LIMIT_MS = 800
LIMITER = {"max": 100, "duration": 1000}


def _redis_ms(r: redis.Redis) -> int:
    seconds, micros = r.time()
    return int(seconds) * 1000 + int(micros) // 1000


def _stream(r: redis.Redis, q: Queue) -> list[tuple[int, dict[str, str]]]:
    return [(int(i.split("-")[0]), f) for i, f in r.xrange(q.keys.events)]


def _starts(r: redis.Redis, q: Queue) -> list[int]:
    return [at for at, f in _stream(r, q) if f.get("event") == "active"]


@pytest.fixture
def r(redis_url: str) -> Any:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()


def test_a_limit_set_in_python_holds_a_node_worker(
    redis_url: str, qname: str, r: redis.Redis
) -> None:
    """Queue.rate_limit(ms): an idle Node worker with a limiter starts none
    of the jobs added meanwhile until the limit ends."""
    q = Queue(qname, redis_url)
    worker = node_worker(redis_url, qname, name="node", limiter=LIMITER)
    try:
        set_at = _redis_ms(r)
        q.rate_limit(LIMIT_MS)
        for n in range(3):
            q.add("j", {"n": n})
        wait_until(lambda: q.get_counts("completed")["completed"] == 3, 15)
    finally:
        worker.stop()
    starts = _starts(r, q)
    assert len(starts) == 3
    assert min(starts) >= set_at + LIMIT_MS - CLOCK_SLACK_MS, (set_at, starts)
    q.close()


def test_a_limit_set_in_node_holds_a_bullpen_worker(
    redis_url: str, qname: str, r: redis.Redis
) -> None:
    """Node's queue.rateLimit(ms): an idle Bullpen worker with a limiter
    starts none of the jobs added meanwhile until the limit ends."""
    q = Queue(qname, redis_url)
    with python_worker(redis_url, qname, limiter=LIMITER):
        set_at = _redis_ms(r)
        call(redis_url, qname, "rateLimit", LIMIT_MS)
        for n in range(3):
            q.add("j", {"n": n})
        wait_until(lambda: q.get_counts("completed")["completed"] == 3, 15)
    starts = _starts(r, q)
    assert len(starts) == 3
    assert min(starts) >= set_at + LIMIT_MS - CLOCK_SLACK_MS, (set_at, starts)
    q.close()


@pytest.mark.parametrize("first", ["node", "python"])
def test_a_job_given_back_for_a_rate_limit_holds_both_languages(
    redis_url: str, qname: str, r: redis.Redis, first: str
) -> None:
    """A Node and a Bullpen worker (both with a limiter) on one queue; job 1's
    first run hits a rate limit (Node: worker.rateLimit + RateLimitError;
    Bullpen: RateLimitError(delay_ms)), `first` being the only worker when
    it does. It goes back once, uncounted; nothing starts on either worker
    until the limit ends; then every job completes, none failed. The limit
    starts when it is set: Bullpen sets it in the give-back's own script
    (so at the `waiting` event), Node in a call of its own before it (so
    between job 1's first start and that event: only that much is known)."""
    q = Queue(qname, redis_url)
    first_job = q.add("j", {"rateLimitMs": LIMIT_MS}, attempts=1)
    workers = []
    if first == "node":
        workers.append(node_worker(redis_url, qname, name="node", limiter=LIMITER))
    alone = python_worker(redis_url, qname, limiter=LIMITER)
    with alone if first == "python" else nullcontext():
        back = wait_until(
            lambda: next(
                (
                    at
                    for at, f in _stream(r, q)
                    if f.get("event") == "waiting" and f.get("prev") == "active"
                ),
                None,
            ),
            15,
            what="the rate-limited job given back",
        )
        # The other language's worker joins while the limit holds.
        if first == "python":
            workers.append(node_worker(redis_url, qname, name="node", limiter=LIMITER))
        others = [q.add("j", {"n": n}).id for n in range(3)]
        with python_worker(redis_url, qname, "py2", limiter=LIMITER):
            wait_until(lambda: q.get_counts("completed")["completed"] == 4, 20)
    for worker in workers:
        worker.stop()
    after = [at for at in _starts(r, q) if at > back]
    assert len(after) == 4, after  # job 1 again, then the three others
    set_at = back if first == "python" else min(_starts(r, q))
    assert min(after) >= set_at + LIMIT_MS - CLOCK_SLACK_MS, (set_at, back, after)
    job = q.get_job(first_job.id)
    assert job.attempts_made == 1 and job.failed_reason is None
    assert q.get_counts("failed")["failed"] == 0
    assert all(q.get_job(i).returnvalue["double"] is not None for i in others)
    q.close()


def test_both_read_the_rate_limit_ttl_alike(
    redis_url: str, qname: str, r: redis.Redis
) -> None:
    """get_rate_limit_ttl and Node's getRateLimitTtl, with and without a
    max, in each state of the limiter: none, a manual limit, a window's
    count under and at the max, the global rate limit's max, no expiry."""
    q = Queue(qname, redis_url)

    def both(max_jobs: int | None) -> tuple[int, int]:
        node_args = [] if max_jobs is None else [max_jobs]
        return q.get_rate_limit_ttl(max_jobs), call(
            redis_url, qname, "getRateLimitTtl", *node_args
        )

    def alike(max_jobs: int | None, expect: str) -> None:
        ours, theirs = both(max_jobs)
        if expect == "positive":
            assert ours > 0 and theirs > 0 and abs(ours - theirs) < 2000, (
                ours,
                theirs,
            )
        else:
            assert ours == theirs == int(expect), (max_jobs, ours, theirs)

    alike(None, "-2")
    alike(5, "0")
    # (Limits of a minute: each Node call is a process of its own, a second
    # or more on a busy machine; a 5 s limit expired between the two reads.)
    call(redis_url, qname, "rateLimit", 60_000)
    alike(None, "positive")
    alike(5, "positive")
    q.remove_rate_limit_key()
    r.set(q.keys.limiter, 3, px=60_000)
    alike(5, "0")
    alike(3, "positive")
    alike(None, "positive")
    q.set_global_rate_limit(4, 1000)
    alike(None, "0")
    r.incr(q.keys.limiter)
    alike(None, "positive")
    r.persist(q.keys.limiter)
    alike(None, "0")
    alike(2, "0")
    q.close()
