"""Queue-level API: paging that reads only the page, counts, async twin, names."""

from __future__ import annotations

import asyncio
import threading

import pytest
import redis

from queues import AsyncQueue, JobState, Queue
from queues.exceptions import InvalidJobOptions


def _fill(q: Queue) -> None:
    q.add_bulk([{"name": f"w{i}", "data": {"i": i}} for i in range(25)])
    for i in range(5):
        q.add(f"p{i}", {"i": i}, priority=i + 1)
    for i in range(4):
        q.add(f"d{i}", {"i": i}, delay=60_000 + i)


def test_get_jobs_pages_across_states_in_order(redis_url: str, qname: str) -> None:
    """Pages over several states concatenate in state order without gaps or repeats."""
    q = Queue(qname, redis_url)
    _fill(q)
    states = ["waiting", "prioritized", "delayed"]
    everything = [j.id for j in q.get_jobs(states)]
    assert len(everything) == 34
    paged = []
    for start in range(0, 34, 7):
        paged += [j.id for j in q.get_jobs(states, start, start + 6)]
    assert paged == everything
    # newest first in wait by default; asc gives the oldest first
    assert [j.name for j in q.get_jobs("waiting", 0, 2)] == ["w24", "w23", "w22"]
    assert [j.name for j in q.get_jobs("waiting", 0, 2, asc=True)] == ["w0", "w1", "w2"]
    # prioritized and delayed by score (ascending = next to run first)
    assert [j.name for j in q.get_jobs("prioritized", asc=True)] == [
        "p0",
        "p1",
        "p2",
        "p3",
        "p4",
    ]
    assert [j.name for j in q.get_jobs("delayed", 0, 1, asc=True)] == ["d0", "d1"]
    assert q.get_jobs("waiting", 100, 200) == []


def test_get_jobs_reads_only_the_page(redis_url: str, qname: str) -> None:
    """A page of 10 from a 5,000-job queue reads 10 ids and 10 hashes, no full range."""
    q = Queue(qname, redis_url)
    for _ in range(5):
        q.add_bulk([{"name": "n", "data": {}} for _ in range(1000)])
    mon_client = redis.Redis.from_url(redis_url, decode_responses=True)
    seen: list[str] = []
    ready = threading.Event()

    def watch() -> None:
        with mon_client.monitor() as m:
            ready.set()
            for cmd in m.listen():
                seen.append(cmd["command"])
                if cmd["command"].startswith("PING"):
                    return

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    ready.wait(5)
    jobs = q.get_jobs(["waiting"], 4990, 4999)
    q.client.ping()
    t.join(5)
    assert [j.id for j in jobs] == [str(i) for i in range(10, 0, -1)]
    hgetall = [c for c in seen if c.startswith("HGETALL")]
    ranges = [c for c in seen if c.startswith(("LRANGE", "ZRANGE", "ZREVRANGE"))]
    assert len(hgetall) == 10
    assert ranges == [f"LRANGE {q.keys.wait} 4990 4999"]


def test_counts_include_legacy_paused_list(
    redis_url: str, qname: str, r: redis.Redis
) -> None:
    """`waiting` counts a v5 `paused` list too; unknown state names are refused."""
    q = Queue(qname, redis_url)
    q.add("a", {})
    r.lpush(q.keys.paused, "legacy-1", "legacy-2")
    assert q.get_counts("waiting")["waiting"] == 3
    with pytest.raises(ValueError, match="unknown job state"):
        q.get_counts("nope")


def test_add_validates_options(redis_url: str, qname: str) -> None:
    """Bad ids, priorities, delays and unknown options fail before touching Redis."""
    q = Queue(qname, redis_url)
    for bad in [
        dict(job_id="123"),
        dict(job_id="a:b"),
        dict(job_id="0:x"),
        dict(priority=-1),
        dict(priority=2**21),
        dict(delay=-5),
        dict(attempts=-1),
        dict(backoff="soon"),
        dict(frobnicate=True),
        dict(remove_on_complete={"cnt": 1}),
    ]:
        with pytest.raises(InvalidJobOptions):
            q.add("x", {}, **bad)
    with pytest.raises(InvalidJobOptions, match="size_limit"):
        q.add("x", {"blob": "a" * 100}, size_limit=50)
    with pytest.raises(ValueError, match="queue name"):
        Queue("bad:name", redis_url)
    assert q.get_counts() == {
        s.value: 0
        for s in [
            JobState.ACTIVE,
            JobState.COMPLETED,
            JobState.DELAYED,
            JobState.FAILED,
            JobState.PRIORITIZED,
            JobState.WAITING,
            JobState.WAITING_CHILDREN,
        ]
    }


def test_custom_id_duplicate_returns_existing(redis_url: str, qname: str) -> None:
    """Adding an existing custom id changes nothing and returns that job's id."""
    q = Queue(qname, redis_url)
    q.add("first", {"v": 1}, job_id="same")
    again = q.add("second", {"v": 2}, job_id="same")
    assert again.id == "same"
    job = q.get_job("same")
    assert job is not None and job.name == "first" and job.data == {"v": 1}
    assert q.get_counts("waiting")["waiting"] == 1


def test_async_queue_has_the_same_api(redis_url: str, qname: str) -> None:
    """AsyncQueue's methods are awaitable twins of Queue's."""

    async def main() -> None:
        aq = AsyncQueue(qname, redis_url)
        job = await aq.add("a", {"k": "v"}, priority=2)
        got = await aq.get_job(job.id)
        assert got is not None and got.data == {"k": "v"} and got.priority == 2
        assert await got.get_state() == JobState.PRIORITIZED
        await got.update_progress({"pct": 10})
        await got.log("hello")
        assert await aq.get_job_logs(job.id) == (["hello"], 1)
        bulk = await aq.add_bulk([{"name": "b", "data": i} for i in range(3)])
        assert len(bulk) == 3
        assert (await aq.get_counts("prioritized", "waiting")) == {
            "prioritized": 1,
            "waiting": 3,
        }
        await aq.pause()
        assert await aq.is_paused()
        await aq.resume()
        assert not await aq.is_paused()
        assert [j.id for j in await aq.get_jobs(["waiting"], asc=True)] == [
            "2",
            "3",
            "4",
        ]
        await aq.close()

    asyncio.run(main())
