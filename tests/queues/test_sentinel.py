"""Redis Sentinel: `redis+sentinel://` URLs, and queues and workers that follow
the primary through a failover (a real topology on free loopback ports)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis
from redis.sentinel import Sentinel

from queues import AsyncWorker, Durability, NotDurable, Queue
from queues.connection import (
    async_client,
    async_waiting_client,
    for_blocking,
    sent_once_client,
    sibling_async_client,
    sibling_sync_client,
    sync_client,
    worker_client,
)
from queues.devredis import RedisServer, free_port
from queues.sentinel import SentinelUrl, WaitingSentinelPool, parse_sentinel_url
from tests.queues.test_cli import assert_error, cli, ok

MASTER = "m"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (
            "redis+sentinel://127.0.0.1:26379,h2:26380/m/2",
            SentinelUrl((("127.0.0.1", 26379), ("h2", 26380)), "m", 2),
        ),
        ("redis+sentinel://h/m", SentinelUrl((("h", 26379),), "m", 0)),
        ("redis+sentinel://h:1/m/", SentinelUrl((("h", 1),), "m", 0)),
        (
            "redis+sentinel://:s%40cret@h:5/mymaster/3",
            SentinelUrl((("h", 5),), "mymaster", 3, None, "s@cret"),
        ),
        (
            "REDIS+SENTINEL://u:p@[::1]:7,h/m",
            SentinelUrl((("::1", 7), ("h", 26379)), "m", 0, "u", "p"),
        ),
    ],
)
def test_good_urls(url: str, expected: SentinelUrl) -> None:
    assert parse_sentinel_url(url) == expected


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("redis+sentinel:///m/0", "no sentinel host"),
        ("redis+sentinel://:pw@/m/0", "no sentinel host"),
        ("redis+sentinel://h:1,:2/m", "has no host"),
        ("redis+sentinel://h:26379", "no master name"),
        ("redis+sentinel://h:26379/", "no master name"),
        ("redis+sentinel://h:26379//0", "no master name"),
        ("redis+sentinel://h:26379/m/x", "db 'x' is not a number"),
        ("redis+sentinel://h:26379/m/-1", "is not a number"),
        ("redis+sentinel://h:26379/m/0/1", "nothing more"),
        ("redis+sentinel://h:port/m", "bad port"),
        ("redis+sentinel://h:0/m", "bad port"),
        ("redis+sentinel://h:70000/m", "bad port"),
        ("redis+sentinel://h/m?db=1", "not supported"),
    ],
)
def test_bad_urls_say_why_in_one_sentence(url: str, why: str) -> None:
    with pytest.raises(ValueError, match=why) as info:
        sync_client(url)
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match=why):
        Queue("q", url)


def test_the_cli_says_what_is_wrong_with_a_sentinel_url_in_one_line() -> None:
    assert_error(cli("redis+sentinel://h:26379/m/x", "counts", "q"), "not a number")
    unreachable = f"redis+sentinel://127.0.0.1:{free_port()}/m"
    assert_error(cli(unreachable, "counts", "q"), "no sentinel named its primary")


def test_the_password_is_never_in_the_error() -> None:
    with pytest.raises(ValueError) as info:
        parse_sentinel_url("redis+sentinel://:hunter2@h:x/m")
    assert "hunter2" not in str(info.value)


#: A replica's sync starts at once, not after the 5 s default.
_NO_SYNC_DELAY = ("--repl-diskless-sync-delay", "0")


class Topology:
    """A primary, its replicas (one unless told) and three sentinels
    monitoring them as `m`."""

    def __init__(self, replicas: int = 1) -> None:
        self.primary = RedisServer(extra_args=_NO_SYNC_DELAY).start()
        follow = ("--replicaof", "127.0.0.1", str(self.primary.port))
        self.replicas = [
            RedisServer(extra_args=(*follow, *_NO_SYNC_DELAY)).start()
            for _ in range(replicas)
        ]
        self.replica = self.replicas[0]
        # RedisServers: a port another process takes before a sentinel binds
        # it is picked again.
        self.sentinels = [
            RedisServer(
                extra_args=("--sentinel",),
                config=(
                    f"sentinel monitor {MASTER} 127.0.0.1 {self.primary.port} 2\n"
                    f"sentinel down-after-milliseconds {MASTER} 1000\n"
                    f"sentinel failover-timeout {MASTER} 3000\n"
                ),
            ).start()
            for _ in range(3)
        ]
        self.ports = [s.port for s in self.sentinels]
        self.url = (
            "redis+sentinel://"
            + ",".join(f"127.0.0.1:{p}" for p in self.ports)
            + f"/{MASTER}/0"
        )
        self._wait_ready()

    def _wait_ready(self) -> None:
        """Every sentinel knows the replica (in sync) and the other sentinels."""
        deadline = time.monotonic() + 30
        while True:
            try:
                if self._ready():
                    return
            except redis.RedisError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the sentinel topology did not come up")
            time.sleep(0.1)

    def _ready(self) -> bool:
        for replica in self.replicas:
            info = redis.Redis(port=replica.port).info("replication")
            if info.get("master_link_status") != "up":
                return False
        for port in self.ports:
            s = redis.Redis(port=port, decode_responses=True)
            if len(s.sentinel_slaves(MASTER)) < len(self.replicas):
                return False
            if len(s.sentinel_sentinels(MASTER)) < 2:
                return False
        return True

    @contextmanager
    def replication_cut(self, seconds: float) -> Iterator[None]:
        """The replicas SIGSTOPped and their links closed by the primary, so
        its writes of the next `seconds` reach none; then the block runs,
        then the replicas go on (nothing of it when `seconds` is 0)."""
        if not seconds:
            yield
            return
        procs = [r.proc for r in self.replicas if r.proc is not None]
        for proc in procs:
            os.kill(proc.pid, signal.SIGSTOP)
        try:
            primary = redis.Redis(port=self.primary.port)
            primary.client_kill_filter(_type="replica")
            primary.close()
            time.sleep(seconds)
            yield
        finally:
            for proc in procs:
                os.kill(proc.pid, signal.SIGCONT)

    def master_port(self) -> int:
        s = Sentinel([("127.0.0.1", p) for p in self.ports])
        return int(s.discover_master(MASTER)[1])

    def stop(self) -> None:
        for sentinel in self.sentinels:
            sentinel.stop()
        for replica in self.replicas:
            replica.stop()
        self.primary.stop()


@pytest.fixture(scope="module")
def topology() -> Iterator[Topology]:
    """One topology for the tests that leave it as it is."""
    t = Topology()
    yield t
    t.stop()


@pytest.fixture
def own_topology(request: pytest.FixtureRequest) -> Iterator[Topology]:
    """A topology of its own, for a test that kills its primary (replicas:
    the indirect parameter, else 1)."""
    t = Topology(getattr(request, "param", 1))
    yield t
    t.stop()


def test_clients_from_a_sentinel_url_and_their_siblings(topology: Topology) -> None:
    """Every client queues.connection makes from a sentinel URL or a
    `master_for` client goes to the primary through the sentinels, decoding
    as our own clients do."""
    sync = sync_client(topology.url)
    sync.set("k", b"\xff")
    assert sync.get("k") == "\udcff"
    assert sync.info("server")["tcp_port"] == topology.primary.port
    made = Sentinel([("127.0.0.1", p) for p in topology.ports]).master_for(MASTER)
    for client in (
        sync_client(made),
        sibling_sync_client(sync, socket_timeout=9),
        for_blocking(sync_client(made), 30),
    ):
        assert client.connection_pool.service_name == MASTER
        assert client.get("k") == "\udcff"

    async def main() -> None:
        clients = [async_client(topology.url), worker_client(topology.url)]
        clients.append(async_client(made))
        clients.append(sibling_async_client(clients[0]))
        clients.append(sent_once_client(clients[1]))
        clients.append(for_blocking(clients[0], 30))
        for client in clients:
            assert isinstance(client, aioredis.Redis)
            assert client.connection_pool.service_name == MASTER
            assert await client.get("k") == "\udcff"
            await client.aclose()

    asyncio.run(main())


def test_a_waiting_sentinel_client_waits_for_a_free_connection(
    topology: Topology,
) -> None:
    """The live reader's side client: with its two connections busy, ten
    commands at once wait their turn instead of failing with "Too many
    connections", and every connection goes to the primary."""

    async def main() -> None:
        client = async_waiting_client(topology.url, 2, decode_responses=True)
        assert isinstance(client.connection_pool, WaitingSentinelPool)
        replies = await asyncio.gather(
            *(client.blpop([f"none{i}"], 0.2) for i in range(10))
        )
        assert replies == [None] * 10
        assert (await client.info("server"))["tcp_port"] == topology.primary.port
        await client.aclose()

    asyncio.run(main())


def _run_workers(
    url: str, qname: str, count: int, stop: threading.Event, **options: Any
) -> threading.Thread:
    async def proc(job: Any) -> Any:
        await asyncio.sleep(0.005)
        return job.data["i"]

    async def main() -> None:
        workers = [
            AsyncWorker(qname, proc, connection=url, concurrency=4, **options)
            for _ in range(count)
        ]
        tasks = [asyncio.create_task(w.run(install_signals=False)) for w in workers]
        while not stop.is_set():
            await asyncio.sleep(0.05)
        for w in workers:
            w.close(force=True)
        await asyncio.gather(*tasks)

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    return thread


def _wait_for(check: Any, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return False


def test_add_and_process_through_sentinel(topology: Topology) -> None:
    q = Queue("sq", topology.url)
    q.add_bulk([{"name": "n", "data": {"i": i}} for i in range(30)])
    stop = threading.Event()
    thread = _run_workers(topology.url, "sq", 1, stop)
    try:
        assert _wait_for(lambda: q.get_counts("completed")["completed"] == 30, 20)
    finally:
        stop.set()
        thread.join(10)
    assert q.get_job("7") is not None and q.get_job("7").returnvalue == 6  # type: ignore[union-attr]


def test_the_cli_through_sentinel(topology: Topology) -> None:
    ok(cli(topology.url, "add", "cq", "n", "--data", '{"x": 1}'))
    assert json.loads(ok(cli(topology.url, "counts", "cq", "--json")))["waiting"] == 1


def _promoted(topology: Topology) -> bool:
    try:
        return topology.master_port() in [r.port for r in topology.replicas]
    except redis.RedisError:
        return False


Add = tuple[str, int, float]  # (job id, data["i"], when the add returned)


@dataclass
class Producer:
    """A producer thread's adds (`data["i"]` counting from `first`), and what
    each add answered."""

    durability: Durability | None = None
    first: int = 0
    acked: list[Add] = field(default_factory=list)
    #: Adds that raised NotDurable: stored on the primary, not confirmed.
    unconfirmed: list[Add] = field(default_factory=list)
    #: Adds that failed with a connection error (stored or not: unknown).
    errors: int = 0

    def run(self, url: str, qname: str, stop: threading.Event) -> threading.Thread:
        def produce() -> None:
            queue = Queue(qname, url, durability=self.durability)
            i = self.first
            while not stop.is_set():
                try:
                    job_id = queue.add("n", {"i": i}).id
                    self.acked.append((str(job_id), i, time.monotonic()))
                except NotDurable as exc:
                    self.unconfirmed.append((exc.job_id, i, time.monotonic()))
                except (redis.RedisError, OSError):
                    self.errors += 1
                    time.sleep(0.05)
                i += 1

        thread = threading.Thread(target=produce, daemon=True)
        thread.start()
        return thread


@dataclass
class FailoverRun:
    """When the primary was killed and a replica promoted, and the queue."""

    queue: Queue
    killed_at: float = 0.0
    promoted_at: float = 0.0

    def lost(self, adds: list[Add]) -> list[int]:
        """The `i` of the adds whose job is not on the new primary.

        An add lost to asynchronous replication leaves its id to be given
        again by the new primary, so a job counts as kept only with its own
        data; every kept job has finished."""
        lost = []
        for job_id, i, _ in adds:
            job = self.queue.get_job(job_id)
            if job is None or job.data["i"] != i:
                lost.append(i)
            else:
                assert job.finished_on is not None, job_id
        return lost


def _failover_under_load(
    topology: Topology,
    qname: str,
    producers: list[Producer],
    cut_replication_s: float = 0.0,
) -> FailoverRun:
    """SIGKILL the primary while the producers add and three workers process,
    replication first cut for `cut_replication_s` (a lagging replica at the
    moment of the crash); returns once the sentinels promoted a replica,
    each producer had 50 adds acknowledged since, and no job is left
    waiting or active, the same workers having carried on (never restarted)."""
    url = topology.url
    run = FailoverRun(Queue(qname, url))
    stop = threading.Event()
    options = {"lock_duration": 3000, "stalled_interval": 1000}
    workers = _run_workers(url, qname, 3, stop, **options)
    stop_adding = threading.Event()
    threads = [p.run(url, qname, stop_adding) for p in producers]

    def acked_since(at: float, count: int) -> bool:
        return all(sum(t > at for _, _, t in p.acked) >= count for p in producers)

    try:
        assert _wait_for(lambda: acked_since(0, 100), 15)
        assert topology.master_port() == topology.primary.port
        assert topology.primary.proc is not None
        with topology.replication_cut(cut_replication_s):
            run.killed_at = time.monotonic()
            topology.primary.proc.kill()  # SIGKILL, while the producers add
            topology.primary.proc.wait()
        assert _wait_for(lambda: _promoted(topology), 30), "no failover"
        run.promoted_at = time.monotonic()
        assert _wait_for(lambda: acked_since(run.promoted_at, 50), 20), (
            "no add acknowledged after the failover"
        )
        stop_adding.set()
        for thread in threads:
            thread.join(10)

        def all_done() -> bool:
            counts = run.queue.get_counts("active", "waiting", "delayed", "prioritized")
            return not any(counts.values())

        assert _wait_for(all_done, 20), run.queue.get_counts("active", "waiting")
        assert workers.is_alive()  # the same workers, never restarted
    finally:
        stop_adding.set()
        stop.set()
        workers.join(15)
    return run


def test_workers_carry_on_through_a_failover(own_topology: Topology) -> None:
    """SIGKILL the primary while a producer adds and three workers process:
    the sentinels promote the replica and the same workers go on, every job
    added after the failover completes and none stays active. Asynchronous
    replication may lose a few acknowledged adds: the figure is printed."""
    producer = Producer()
    run = _failover_under_load(own_topology, "fq", [producer])
    lost = run.lost(producer.acked)
    print(
        f"\nsentinel failover: {len(lost)} of {len(producer.acked)} acknowledged "
        f"adds lost; {producer.errors} adds failed with a connection error"
    )
    assert len(lost) <= 20
    assert not [i for _, i, at in producer.acked if at > run.promoted_at and i in lost]


@pytest.mark.parametrize("own_topology", [2], indirect=True)
def test_durable_adds_lose_nothing_through_a_failover(own_topology: Topology) -> None:
    """The same failover, replication cut for 0.5 s just before the kill,
    with two producers side by side: plain adds made during the cut are
    acknowledged and lost; durable ones (WAIT for one replica, 100 ms) raise
    NotDurable instead, and no acknowledged durable add is lost. Two
    replicas, so that the new primary still has one to confirm adds after
    the failover; adds that raise NotDurable on it are kept all the same."""
    durable = Producer(Durability(1, 100))
    plain = Producer(first=1_000_000)
    run = _failover_under_load(own_topology, "dq", [durable, plain], 0.5)
    lost = run.lost(durable.acked)
    before = [add for add in durable.unconfirmed if add[2] < run.killed_at]
    after = [add for add in durable.unconfirmed if add[2] > run.promoted_at]
    plain_lost = run.lost(plain.acked)
    print(
        f"\nsentinel failover, durable adds: {len(lost)} of {len(durable.acked)} "
        f"acknowledged adds lost; NotDurable: {len(before)} during the cut "
        f"({len(run.lost(before))} of them lost), {len(after)} after the "
        f"promotion (all kept); {durable.errors} adds failed with a connection "
        f"error\nthe plain producer beside it: {len(plain_lost)} of "
        f"{len(plain.acked)} acknowledged adds lost"
    )
    assert lost == []
    assert before, "no durable add was left unconfirmed during the cut"
    assert plain_lost, "the cut lost no plain add: it did not cut replication"
    assert run.lost(after) == []
