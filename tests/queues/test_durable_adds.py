"""Durable adds (`Queue(..., durability=Durability(...))`): an add returns only
once enough replicas have the job, else raises NotDurable with the job kept on
the primary. A real primary and replica (`--replicaof`), never a fake."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import redis

from queues import AsyncQueue, Durability, NotDurable, Queue, QueueError
from queues.devredis import RedisServer


class Pair:
    """A primary and one replica of it."""

    def __init__(self) -> None:
        # A replica's first sync starts at once, not after the 5 s default.
        self.primary = RedisServer(
            extra_args=("--repl-diskless-sync-delay", "0")
        ).start()
        self.replica = RedisServer(
            extra_args=("--replicaof", "127.0.0.1", str(self.primary.port))
        ).start()
        self.replica_client = redis.Redis(port=self.replica.port, decode_responses=True)
        self.wait_in_sync()

    def wait_in_sync(self) -> None:
        """The replica is linked and has every write of the primary."""
        primary = redis.Redis(port=self.primary.port)
        deadline = time.monotonic() + 20
        try:
            while True:
                info = self.replica_client.info("replication")
                offset = primary.info("replication")["master_repl_offset"]
                if (
                    info.get("master_link_status") == "up"
                    and info["slave_repl_offset"] >= offset
                ):
                    return
                if time.monotonic() > deadline:
                    raise RuntimeError("the replica did not catch up")
                time.sleep(0.05)
        finally:
            primary.close()

    @contextmanager
    def replica_stopped(self) -> Iterator[None]:
        """The replica SIGSTOPped: linked still, but acknowledging nothing."""
        assert self.replica.proc is not None
        os.kill(self.replica.proc.pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(self.replica.proc.pid, signal.SIGCONT)
            self.wait_in_sync()

    def stop(self) -> None:
        self.replica_client.close()
        self.replica.stop()
        self.primary.stop()


@pytest.fixture(scope="module")
def pair() -> Iterator[Pair]:
    p = Pair()
    yield p
    p.stop()


def test_a_durable_add_returns_once_the_replica_has_the_job(
    pair: Pair, qname: str
) -> None:
    """WAIT went after the adds on their own connection: when add and
    add_bulk return, the replica already holds every job."""
    q = Queue(qname, pair.primary.url, durability=Durability(1, 2000))
    for i in range(20):
        job = q.add("n", {"i": i})
        stored = pair.replica_client.hget(q.keys.job(str(job.id)), "data")
        assert stored == f'{{"i":{i}}}'
    jobs = q.add_bulk([{"name": "b", "data": {"i": i}} for i in range(50)])
    assert all(pair.replica_client.exists(q.keys.job(str(j.id))) for j in jobs), (
        "add_bulk returned before the replica had its jobs"
    )
    q.close()


def test_an_unconfirmed_add_raises_not_durable_and_the_job_stays(
    pair: Pair, qname: str
) -> None:
    """With the replica stopped, WAIT times out: NotDurable names the job,
    which is stored on the primary (not confirmed, not "not added")."""
    q = Queue(qname, pair.primary.url, durability=Durability(1, 300))
    with pair.replica_stopped():
        started = time.monotonic()
        with pytest.raises(NotDurable) as info:
            q.add("n", {"i": 1}, job_id="order-1")
        assert time.monotonic() - started >= 0.3
        exc = info.value
        assert isinstance(exc, QueueError)
        assert (exc.job_id, exc.job_ids, exc.acked, exc.wanted) == (
            "order-1",
            ("order-1",),
            0,
            1,
        )
        assert "job order-1 added on the primary but not confirmed" in str(exc)
        assert "0 of 1 replicas acknowledged within 300 ms" in str(exc)
        job = q.get_job("order-1")
        assert job is not None and job.data == {"i": 1}

        with pytest.raises(NotDurable) as bulk:
            q.add_bulk([{"name": "b", "data": {"i": i}} for i in range(7)])
        ids = bulk.value.job_ids
        assert len(ids) == 7 and bulk.value.job_id == ids[0]
        assert [q.get_job(i).data for i in ids] == [{"i": i} for i in range(7)]  # type: ignore[union-attr]
        assert str(bulk.value).startswith(f"jobs {', '.join(ids[:5])} and 2 more")
    # Retrying with the same job_id once the replica is back adds nothing new
    # and is confirmed.
    again = q.add("n", {"i": 1}, job_id="order-1")
    assert again.id == "order-1"
    assert q.get_counts("waiting")["waiting"] == 8
    q.close()


def test_async_queue_counts_the_replicas_that_confirmed(pair: Pair, qname: str) -> None:
    """AsyncQueue adds durably too; asking for more replicas than there are
    reports how many did confirm."""

    async def main() -> None:
        q = AsyncQueue(qname, pair.primary.url, durability=Durability(2, 150))
        try:
            with pytest.raises(NotDurable) as info:
                await q.add("n", {"i": 1})
            assert (info.value.acked, info.value.wanted) == (1, 2)
            assert pair.replica_client.exists(q.keys.job(info.value.job_id))
        finally:
            await q.close()
        one = AsyncQueue(qname, pair.primary.url, durability=Durability(1, 1000))
        try:
            jobs = await one.add_bulk([{"name": "b"}, {"name": "c"}])
            assert [j.name for j in jobs] == ["b", "c"]
        finally:
            await one.close()

    asyncio.run(main())


def test_the_wait_outlasts_a_short_read_timeout(pair: Pair, qname: str) -> None:
    """A client whose read timeout is shorter than the WAIT still gets the
    WAIT's answer: redis-py timing out would send the add again."""
    client = redis.Redis(port=pair.primary.port, socket_timeout=0.2)
    q = Queue(qname, client, durability=Durability(1, 500))
    with pair.replica_stopped():
        with pytest.raises(NotDurable):
            q.add("n")
    assert q.get_counts("waiting")["waiting"] == 1
    q.close()
    client.close()


def test_no_replica_means_no_add_is_confirmed(redis_url: str, qname: str) -> None:
    """On a server without replicas every durable add raises NotDurable."""
    q = Queue(qname, redis_url, durability=Durability(1, 50))
    with pytest.raises(NotDurable):
        q.add("n")
    assert q.get_counts("waiting")["waiting"] == 1
    q.close()


@pytest.mark.parametrize(
    "kwargs",
    [{"replicas": 0}, {"timeout_ms": 0}, {"replicas": True}, {"timeout_ms": 1.5}],
)
def test_bad_durability_is_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="Durability .* must be an integer >= 1"):
        Durability(**kwargs)  # type: ignore[arg-type]


def test_durability_must_be_a_durability(redis_url: str) -> None:
    with pytest.raises(TypeError, match="durability must be"):
        Queue("q", redis_url, durability=1)  # type: ignore[arg-type]
