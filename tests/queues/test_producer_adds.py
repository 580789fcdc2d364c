"""The lean path of adds (queues.hotpath): a queue's own connection, and an
AsyncQueue's concurrent adds sent as one pipeline. Each caller gets its own
job id or its own error, in its own order; NOSCRIPT, a restarted Redis and a
dead one behave as on redis-py's path. A real redis-server throughout."""

from __future__ import annotations

import asyncio
import gc
import threading
import weakref
from typing import Any

import pytest
import redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from queues import AsyncQueue, Queue
from queues.connection import async_client
from queues.devredis import RedisServer
from queues.keys import QueueKeys


def batches(queue: AsyncQueue) -> list[list[Any]]:
    """The batches of add calls the queue's lean path sends from now on."""
    adds: Any = queue.adds
    sent: list[list[Any]] = []
    send = adds._send

    async def recorded(lane: Any, calls: list[Any]) -> list[Any]:
        sent.append(list(calls))
        return await send(lane, calls)

    adds._send = recorded
    return sent


def waiting_ids(r: redis.Redis, qname: str) -> list[str]:
    """The ids in `wait`, oldest first."""
    return list(reversed(r.lrange(QueueKeys(qname).wait, 0, -1)))


def test_concurrent_adds_go_out_as_pipelines_each_with_its_own_id(
    redis_url: str, qname: str, r: redis.Redis
) -> None:
    """200 coroutines adding at once each get their own job, stored with its
    data, in fewer round trips than adds."""

    async def main() -> list[str]:
        async with AsyncQueue(qname, redis_url) as queue:
            sent = batches(queue)
            jobs = await asyncio.gather(*(queue.add("j", {"i": i}) for i in range(200)))
            sizes = [len(b) for b in sent]
            assert max(sizes) > 1 and sum(sizes) == 200
            return [job.id for job in jobs]

    ids = asyncio.run(main())
    assert len(set(ids)) == 200
    assert sorted(waiting_ids(r, qname), key=int) == sorted(ids, key=int)
    for i, job_id in enumerate(ids):
        assert r.hget(QueueKeys(qname).job(job_id), "data") == f'{{"i":{i}}}'


def test_each_caller_keeps_its_order(
    redis_url: str, qname: str, r: redis.Redis
) -> None:
    """Twenty callers adding ten jobs each, concurrently: each caller's jobs
    are stored in the order it added them."""

    async def caller(queue: AsyncQueue, c: int) -> list[str]:
        return [(await queue.add("j", {"c": c, "k": k})).id for k in range(10)]

    async def main() -> list[list[str]]:
        async with AsyncQueue(qname, redis_url) as queue:
            return list(await asyncio.gather(*(caller(queue, c) for c in range(20))))

    per_caller = asyncio.run(main())
    order = {job_id: n for n, job_id in enumerate(waiting_ids(r, qname))}
    assert len(order) == 200
    for ids in per_caller:
        assert [order[i] for i in ids] == sorted(order[i] for i in ids)


def test_one_bad_job_in_a_batch_fails_alone(
    redis_url: str, qname: str, r: redis.Redis
) -> None:
    """A job Redis refuses (its deduplication key is of the wrong type) raises
    for its own caller; the jobs pipelined with it are stored."""
    r.hset(QueueKeys(qname).dedup("bad"), "not", "a string")

    async def main() -> list[Any]:
        async with AsyncQueue(qname, redis_url) as queue:
            sent = batches(queue)
            calls = [
                queue.add(
                    "j", {"i": i}, deduplication={"id": "bad"} if i == 7 else None
                )
                for i in range(20)
            ]
            out = await asyncio.gather(*calls, return_exceptions=True)
            [with_bad] = [b for b in sent if any("bad" in str(c.args) for c in b)]
            assert len(with_bad) > 1  # it went out with others
            return out

    results = asyncio.run(main())
    assert isinstance(results[7], ResponseError)
    assert "WRONGTYPE" in str(results[7])
    good = [job.id for i, job in enumerate(results) if i != 7]
    assert len(set(good)) == 19
    assert sorted(waiting_ids(r, qname)) == sorted(good)


def test_adds_survive_a_script_flush(
    redis_url: str, qname: str, r: redis.Redis
) -> None:
    """After SCRIPT FLUSH, sync, single and pipelined adds load the script
    again and store their jobs (NOSCRIPT never reaches the caller)."""
    with Queue(qname, redis_url) as queue:
        queue.add("j")
        r.script_flush()
        queue.add("j")

    async def main() -> None:
        async with AsyncQueue(qname, redis_url) as queue:
            await queue.add("j")
            r.script_flush()
            await asyncio.gather(*(queue.add("j") for _ in range(10)))
            r.script_flush()
            await queue.add("j")

    asyncio.run(main())
    assert len(waiting_ids(r, qname)) == 14


def test_threads_share_a_sync_queue(redis_url: str, qname: str, r: redis.Redis) -> None:
    """Eight threads adding on one Queue (the lean connection serves one at
    a time, the others go through the pool): every job stored once."""
    ids: list[str] = []
    lock = threading.Lock()
    with Queue(qname, redis_url) as queue:

        def adder() -> None:
            for _ in range(50):
                job_id = queue.add("j").id
                with lock:
                    ids.append(job_id)

        threads = [threading.Thread(target=adder) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(set(ids)) == 400
    assert sorted(waiting_ids(r, qname)) == sorted(ids)


def test_queues_on_one_client_share_its_add_connection(
    redis_url: str, qname: str, r: redis.Redis
) -> None:
    """A hundred short-lived Queue objects on one client, as the dashboard and
    the GPU side make them, hold no connection each: their adds share one."""
    client = redis.Redis.from_url(
        redis_url, decode_responses=True, encoding_errors="surrogateescape"
    )
    before = len(r.client_list())
    for i in range(100):
        Queue(f"{qname}{i}", client).add("j")
    assert len(r.client_list()) - before <= 2
    client.close()


def test_a_client_and_its_add_path_are_freed_together(
    redis_url: str, qname: str
) -> None:
    """The add path kept for a client does not keep the client alive (the
    HTTP API makes an asyncio client per events request)."""

    async def main() -> weakref.ref[Any]:
        client = async_client(redis_url)
        async with AsyncQueue(qname, client) as queue:
            await queue.add("j")
        return weakref.ref(client)

    gone = asyncio.run(main())
    gc.collect()
    assert gone() is None


def test_auto_pipeline_can_be_turned_off(
    redis_url: str, qname: str, r: redis.Redis
) -> None:
    """`AsyncQueue(auto_pipeline=False)` adds through redis-py's path."""

    async def main() -> list[str]:
        async with AsyncQueue(qname, redis_url, auto_pipeline=False) as queue:
            assert queue.adds is None
            jobs = await asyncio.gather(*(queue.add("j") for _ in range(10)))
            return [job.id for job in jobs]

    assert sorted(asyncio.run(main())) == sorted(waiting_ids(r, qname))


# --- a Redis of its own, stopped and restarted ------------------------------------
def test_sync_adds_reconnect_after_a_restart_and_fail_clearly_when_down(
    own_redis: RedisServer, qname: str
) -> None:
    """A restarted Redis costs no add an error (the held connection is
    replaced); a stopped one raises redis-py's ConnectionError, and adds work
    again once it is back."""
    r = redis.Redis.from_url(own_redis.url, decode_responses=True)
    with Queue(qname, own_redis.url) as queue:
        queue.add("before")
        own_redis.restart()
        kept = queue.add("after restart").id
        assert waiting_ids(r, qname) == [kept]
        own_redis.stop()
        with pytest.raises(RedisConnectionError):
            queue.add("while down")
        own_redis.start()
        back = queue.add("back").id
        assert waiting_ids(r, qname) == [back]
    r.close()


def test_async_adds_reconnect_after_a_restart_and_fail_clearly_when_down(
    own_redis: RedisServer, qname: str
) -> None:
    """The same for an AsyncQueue, single and pipelined: after a restart
    every add is stored; while Redis is down each caller gets a
    ConnectionError; once it is back, adds work again."""
    r = redis.Redis.from_url(own_redis.url, decode_responses=True)

    async def main() -> None:
        async with AsyncQueue(qname, own_redis.url) as queue:
            await queue.add("before")
            own_redis.restart()
            jobs = await asyncio.gather(*(queue.add("after") for _ in range(10)))
            assert sorted(waiting_ids(r, qname)) == sorted(j.id for j in jobs)
            own_redis.stop()
            down = await asyncio.gather(
                *(queue.add("down") for _ in range(5)), return_exceptions=True
            )
            assert all(isinstance(e, RedisConnectionError) for e in down)
            own_redis.start()
            back = await queue.add("back")
            assert waiting_ids(r, qname) == [back.id]

    asyncio.run(main())
    r.close()
