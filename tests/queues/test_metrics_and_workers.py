"""Queue.get_metrics (what workers with `metrics` collect) and
Queue.get_workers (the queue's connected workers, from CLIENT LIST)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from redis.exceptions import NoPermissionError, ResponseError

from queues import AsyncQueue, Job, Metrics, MetricsMeta, MetricsOptions, Queue
from queues.clients import client_lists, connection_name, parse_client_list, refused
from queues.drive import gather, run_sync
from queues.worker import AsyncWorker
from tests.helpers import wait_until
from tests.queues.worker.helpers import worker_thread
from tests.redis_server import RedisServer


def process(job: Job) -> Any:
    """Fail the jobs whose data asks for it, complete the others."""
    if job.data.get("fail"):
        raise RuntimeError("asked to fail")
    return job.data.get("n")


def test_get_metrics_of_an_empty_queue(redis_url: str, qname: str) -> None:
    """Nothing collected reads as zeros and no data, as Node's getMetrics."""
    with Queue(qname, redis_url) as q:
        assert q.get_metrics("completed") == Metrics(MetricsMeta(0, 0, 0), [], 0)
        assert q.get_metrics("failed").to_dict() == {
            "meta": {"count": 0, "prevTS": 0, "prevCount": 0},
            "data": [],
            "count": 0,
        }


def test_get_metrics_reads_a_slice_and_the_full_length(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """start/end select data points (0 = newest); `count` is the length of the
    whole list; the hash is read as numbers."""
    with Queue(qname, redis_url) as q:
        r.hset(
            q.keys.metrics("failed"),
            mapping={"count": 12, "prevTS": 1_700_000_000_123, "prevCount": 9},
        )
        r.rpush(q.keys.metrics_data("failed"), 4, 0, 0, 5)
        got = q.get_metrics("failed", 1, 2)
        assert got == Metrics(MetricsMeta(12, 1_700_000_000_123, 9), [0, 0], 4)
        assert q.get_metrics("failed").data == [4, 0, 0, 5]
        assert q.get_metrics("completed").count == 0


def test_get_metrics_rejects_other_states(redis_url: str, qname: str) -> None:
    """Metrics exist for `completed` and `failed` only."""
    with Queue(qname, redis_url) as q:
        with pytest.raises(ValueError, match="completed"):
            q.get_metrics("waiting")


def test_metrics_options_are_checked() -> None:
    """max_data_points is an integer >= 1; the worker takes MetricsOptions only."""
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError):
            MetricsOptions(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        AsyncWorker("q", process, metrics={"maxDataPoints": 10})  # type: ignore[arg-type]


def test_worker_with_metrics_counts_completed_and_failed(
    redis_url: str, qname: str
) -> None:
    """A worker with `metrics` counts each finished job in its target's hash
    (a retried attempt is not a finish); the sync and async queues read it."""
    with Queue(qname, redis_url) as q:
        q.add_bulk({"name": "ok", "data": {"n": i}} for i in range(7))
        q.add_bulk({"name": "bad", "data": {"fail": True}} for _ in range(2))
        q.add("retried", {"fail": True}, attempts=2)
        with worker_thread(
            qname, process, redis_url, metrics=MetricsOptions(60), concurrency=4
        ):
            wait_until(
                lambda: (
                    q.get_counts("completed", "failed") == {"completed": 7, "failed": 3}
                ),
                10,
                what="10 finished jobs",
            )
        completed = q.get_metrics("completed")
        failed = q.get_metrics("failed")
        assert completed.meta.count == 7 and failed.meta.count == 3
        assert completed.meta.prev_ts > 0 and failed.meta.prev_ts > 0
        # Closed minutes hold the jobs up to prevCount; the test spans at most
        # one minute boundary.
        assert sum(completed.data) == completed.meta.prev_count
        assert completed.count == len(completed.data) <= 1

        async def read() -> tuple[Metrics, Metrics]:
            async with AsyncQueue(qname, redis_url) as aq:
                return await aq.get_metrics("completed"), await aq.get_metrics("failed")

        assert asyncio.run(read()) == (completed, failed)


def test_worker_without_metrics_writes_none(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """Without the option no `metrics:*` key is written."""
    with Queue(qname, redis_url) as q:
        q.add_bulk({"name": "ok", "data": {"n": i}} for i in range(3))
        q.add("bad", {"fail": True})
        with worker_thread(qname, process, redis_url):
            wait_until(
                lambda: (
                    q.get_counts("completed", "failed") == {"completed": 3, "failed": 1}
                ),
                10,
                what="4 finished jobs",
            )
        assert not list(r.scan_iter(match=f"{q.keys.base}metrics:*"))


@pytest.fixture
def named(redis_url: str) -> Iterator[list[redis.Redis]]:
    """Open connections named by the test (closed at teardown)."""
    opened: list[redis.Redis] = []
    yield opened
    for conn in opened:
        conn.close()


def open_named(url: str, name: str, into: list[redis.Redis]) -> redis.Redis:
    """A connection that has set its CLIENT name."""
    conn = redis.Redis.from_url(url)
    conn.client_setname(name)
    into.append(conn)
    return conn


def test_get_workers_lists_worker_connections_only(
    redis_url: str, qname: str, named: list[redis.Redis]
) -> None:
    """Connections named `{prefix}:{base64(queue)}` or `...:w:{name}` are
    listed with their CLIENT LIST fields, `name` = the queue name and
    `rawname` = the connection name; QueueEvents (`:qe`), other queues, other
    prefixes and look-alike names are not."""
    base = connection_name("bull", qname)
    for name in (
        base,
        base + ":w:alpha",
        base + ":qe",
        base + "x",
        connection_name("bull", qname + "2"),
        connection_name("other", qname),
    ):
        open_named(redis_url, name, named)
    with Queue(qname, redis_url) as q:
        found = q.get_workers()
        assert sorted(w["rawname"] for w in found) == sorted([base, base + ":w:alpha"])
        assert {w["name"] for w in found} == {qname}
        for w in found:
            assert {"id", "addr", "age", "idle", "cmd"} <= set(w)
        assert q.get_workers_count() == 2
        with worker_thread(qname, process, redis_url, worker_name="py1"):
            wait_until(lambda: q.get_workers_count() == 3, 10, what="the worker")
            assert base + ":w:py1" in {w["rawname"] for w in q.get_workers()}
        wait_until(lambda: q.get_workers_count() == 2, 10, what="the worker to go")

        async def count() -> tuple[int, list[dict[str, str]]]:
            async with AsyncQueue(qname, redis_url) as aq:
                return await aq.get_workers_count(), await aq.get_workers()

        n, listed = asyncio.run(count())
        assert n == 2 and {w["rawname"] for w in listed} == {base, base + ":w:alpha"}


def test_get_workers_is_empty_when_client_list_is_removed(qname: str) -> None:
    """On a server without CLIENT (renamed away, as managed Redis does),
    get_workers() is [] instead of an error; other errors still raise."""
    server = RedisServer(extra_args=("--rename-command", "CLIENT", '""')).start()
    try:
        with Queue(qname, server.url) as q:
            assert q.get_workers() == []
            assert q.get_workers_count() == 0
            q.add("still", {"works": True})
            with pytest.raises(ResponseError):
                q.get_metrics("completed", "x", 1)  # type: ignore[arg-type]

        async def read() -> list[dict[str, str]]:
            async with AsyncQueue(qname, server.url) as aq:
                return await aq.get_workers()

        assert asyncio.run(read()) == []
    finally:
        server.stop()


def test_get_workers_is_empty_without_permission(
    r: redis.Redis, redis_server: RedisServer, qname: str
) -> None:
    """A user whose ACL forbids CLIENT LIST gets [] too."""
    r.execute_command("ACL", "SETUSER", "nolist", "on", "nopass", "~*", "&*", "+@all")
    r.execute_command("ACL", "SETUSER", "nolist", "-client")
    try:
        url = f"redis://nolist:x@127.0.0.1:{redis_server.port}/0"
        with Queue(qname, url) as q:
            assert q.get_workers() == []
    finally:
        r.execute_command("ACL", "DELUSER", "nolist")


def test_refused_and_parsing() -> None:
    """Only a missing or forbidden CLIENT command counts as refused; CLIENT
    LIST lines become field dicts (a value may contain '=')."""
    assert refused(ResponseError("unknown command 'client', with args"))
    assert refused(ResponseError("unknown command `CLIENT`, with args"))
    assert refused(NoPermissionError("User x has no permissions"))
    assert not refused(ResponseError("unknown command 'clients'"))
    assert not refused(ResponseError("LOADING Redis is loading"))
    assert parse_client_list("id=1 name=a=b cmd=x\r\nid=2 name=\n\n") == [
        {"id": "1", "name": "a=b", "cmd": "x"},
        {"id": "2", "name": ""},
    ]


def test_client_lists_is_one_list_per_server(r: redis.Redis) -> None:
    """On one server, CLIENT LIST (an EveryPrimary request) is one list, which
    holds this connection; such a request cannot join a gather's pipeline."""
    r.client_setname("lister")
    nodes = run_sync(client_lists(), r)
    assert len(nodes) == 1
    assert "lister" in {c.get("name") for c in nodes[0]}
    with pytest.raises(TypeError, match="EveryPrimary"):
        run_sync(gather([client_lists()]), r)
