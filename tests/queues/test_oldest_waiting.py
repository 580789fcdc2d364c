"""ops.oldest_waiting: since when the job next in line has waited (the
dashboard's "oldest waiting" age and metric read it)."""

from __future__ import annotations

from queues import Queue, ops


def test_nothing_waiting_reads_none(redis_url: str, qname: str) -> None:
    """An empty queue, or one with only delayed jobs, has no oldest waiting job."""
    with Queue(qname, redis_url) as q:
        assert q.drive(ops.oldest_waiting(q.keys)) is None
        q.add("later", {}, delay=60_000)
        assert q.drive(ops.oldest_waiting(q.keys)) is None


def test_oldest_of_wait_and_prioritized(redis_url: str, qname: str) -> None:
    """The timestamp (plus delay) of the older of the next job in `wait` and
    the next in `prioritized`; integers even when another client wrote floats."""
    with Queue(qname, redis_url) as q:
        q.add("first", {}, timestamp=1_000_000)
        q.add("second", {}, timestamp=2_000_000)
        assert q.drive(ops.oldest_waiting(q.keys)) == 1_000_000
        urgent = q.add("urgent", {}, priority=1, timestamp=500_000)
        assert q.drive(ops.oldest_waiting(q.keys)) == 500_000
        q.client.hset(q.keys.job(urgent.id), mapping={"timestamp": "400000.5"})
        q.client.hset(q.keys.job(urgent.id), "delay", "50")
        assert q.drive(ops.oldest_waiting(q.keys)) == 400_050


def test_a_paused_queue_still_reads_its_waiting_jobs(
    redis_url: str, qname: str
) -> None:
    """Pausing keeps jobs in `wait` (BullMQ 6): their age still reads, as does
    that of a job in the legacy `paused` list older versions moved them to."""
    with Queue(qname, redis_url) as q:
        q.add("held", {}, timestamp=3_000_000)
        q.pause()
        assert q.drive(ops.oldest_waiting(q.keys)) == 3_000_000
        q.client.lmove(q.keys.wait, q.keys.paused, "RIGHT", "LEFT")
        assert q.drive(ops.oldest_waiting(q.keys)) == 3_000_000
