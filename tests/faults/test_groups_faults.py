"""Grouped jobs under faults (docs/groups.md): Redis faults and a worker
SIGKILL loop under a producer adding grouped jobs across capped groups and
3 worker processes. Every acknowledged add completes, no job runs twice at
once, no group is left with jobs and no progress, and the group counters end
consistent (`a` 0, no ticket left nor counted parked (`pk`), no lease)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from queues import Queue
from tests.faults import grouped, harness
from tests.helpers import wait_until
from tests.redis_server import RedisServer

GROUPS = 10
CAPS = {f"g{i}": 2 for i in range(GROUPS)} | {"g0": 1}


@pytest.fixture
def aof_redis() -> Iterator[RedisServer]:
    """A redis-server of the test's own that persists to an AOF."""
    server = harness.aof_server()
    yield server
    server.stop()


def _set_caps(url: str, queue: str) -> None:
    with Queue(queue, url) as q:
        q.set_group_defaults(concurrency=2)
        q.set_group("g0", concurrency=1)


def _settle(url: str, queue: str, acked: list[str], timeout: float = 30.0) -> None:
    """Wait until every acknowledged add completed: a group left with jobs
    and no progress (stuck) fails here, naming what it holds."""

    def done() -> bool:
        try:
            return harness.not_completed(url, queue, acked) == []
        except redis.RedisError:
            return False

    try:
        wait_until(done, timeout, 0.1, what="every acknowledged grouped job")
    except AssertionError:
        missing = harness.not_completed(url, queue, acked)
        problems = grouped.group_problems(url, queue)
        msg = f"{len(missing)} not completed; groups: {problems}"
        raise AssertionError(msg) from None


def _exposed(run: grouped.Run, windows: list[tuple[float, float]]) -> bool:
    """Whether the run was live while a fault kept workers from renewing
    their leases: from the fault's start to a lock duration plus a stalled
    check after its end (a lease not renewed in the fault lapses by then)."""
    tail = (harness.LOCK_DURATION_MS + harness.STALLED_INTERVAL_MS) / 1000
    assert run.end is not None
    return any(run.start <= t1 + tail and run.end >= t0 for t0, t1 in windows)


@pytest.mark.slow  # load/soak: make test runs it, make test-fast does not
def test_grouped_jobs_complete_through_redis_faults(
    aof_redis: RedisServer, qname: str, tmp_path: Path
) -> None:
    """SHUTDOWN and restart (AOF), SIGSTOP beyond the lock, CLIENT KILL and
    maxmemory, one after the other, under grouped adds over 10 groups capped
    at 2 (g0 at 1): every acknowledged add completes once the faults end, the
    group keys end clean, and two runs of one job overlap only where a fault
    let the first one's lease lapse (BullMQ's at-least-once after a lost
    lock; outside a fault, never)."""
    url = aof_redis.url
    _set_caps(url, qname)
    workers = harness.Workers(url, qname, tmp_path, 3, grouped.PROCESSOR)
    workers.wait_ready(url, qname)
    producer = harness.Producer(url, qname, groups=GROUPS, ms=30).start()
    windows: list[tuple[float, float]] = []
    try:
        wait_until(lambda: len(producer.acked) >= 20, 20, what="the first adds")
        for name, fault in harness.FAULTS.items():
            admin = redis.Redis.from_url(url, decode_responses=True)
            t0 = time.time()
            fault(aof_redis, admin)
            windows.append((t0, time.time()))
            admin.close()
            time.sleep(1.0)  # the producer keeps adding meanwhile
            assert workers.exited() == [], f"after {name}:\n{workers.log_text()}"
            _settle(url, qname, list(producer.acked))
        producer.stop()
        _settle(url, qname, producer.acked)
        assert workers.exited() == []
    finally:
        producer.stop()
        statuses = workers.stop()
    assert statuses == [0, 0, 0], workers.log_text()
    assert len(producer.acked) > 100
    with Queue(qname, url) as q:
        counts = q.get_counts("active", "failed", "wait", "delayed")
    assert counts == {"active": 0, "failed": 0, "waiting": 0, "delayed": 0}
    assert grouped.group_problems(url, qname) == []
    runs = grouped.close_killed(grouped.read_runs(url, qname), {})
    assert {r.job_id for r in runs} >= set(producer.acked)
    unexplained = [
        (a, b) for a, b in grouped.concurrent_reruns(runs) if not _exposed(a, windows)
    ]
    assert unexplained == []


@pytest.mark.slow  # load/soak: make test runs it, make test-fast does not
def test_grouped_jobs_complete_through_a_worker_kill_loop(
    own_redis: RedisServer, qname: str, tmp_path: Path
) -> None:
    """A worker process SIGKILLed and restarted every 1.5 s for 15 s under
    grouped adds of 100 ms jobs over 10 capped groups: the killed workers'
    jobs come back through their lapsed leases and complete; no job ever
    runs twice at once and no group over its cap (a cut run ends at its
    kill); the group keys end clean."""
    url = own_redis.url
    _set_caps(url, qname)
    workers = harness.Workers(url, qname, tmp_path, 3, grouped.PROCESSOR)
    workers.wait_ready(url, qname)
    producer = harness.Producer(url, qname, groups=GROUPS, ms=100).start()
    killed: dict[int, float] = {}
    try:
        wait_until(lambda: len(producer.acked) >= 20, 20, what="the first adds")
        for n in range(10):
            time.sleep(1.5)
            pid, at = workers.kill_and_restart(n % 3)
            killed[pid] = at
        producer.stop()
        # The last one started must be up (its SIGTERM handler in place).
        workers.wait_ready(url, qname)
        _settle(url, qname, producer.acked)
        assert workers.exited() == [], workers.log_text()
    finally:
        producer.stop()
        statuses = workers.stop()
    assert statuses == [0, 0, 0], workers.log_text()
    assert grouped.group_problems(url, qname) == []
    with Queue(qname, url) as q:
        assert q.get_counts("active", "failed") == {"active": 0, "failed": 0}
    raw = grouped.read_runs(url, qname)
    cut = [r for r in raw if r.end is None]
    assert cut, "no kill cut a running job: the test proved nothing"
    runs = grouped.close_killed(raw, killed)
    # Each cut job came back (its lease lapsed, the stalled check) and completed.
    assert harness.not_completed(url, qname, [r.job_id for r in cut]) == []
    assert grouped.concurrent_reruns(runs) == []
    peaks = grouped.group_peaks(runs)
    assert {g: p for g, p in peaks.items() if p > CAPS[g]} == {}
