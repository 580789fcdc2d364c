"""queues.connection: the asyncio clients it makes pack commands with hiredis,
byte for byte as redis-py's own packer, and round-trip every kind of value."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis.asyncio as aioredis

from queues import AsyncQueue
from queues.connection import async_client, sibling_async_client
from queues.packing import HiredisPacking

pytest.importorskip("hiredis")

ARGS: list[tuple[Any, ...]] = [
    ("EVALSHA", "a" * 40, 2, "bull:q:wait", "bull:q:active", 1796018683259, "{}"),
    ("SET", "k", "text with ünïcödé and a \u2603"),
    ("SET", "k", b"\x00\xff raw bytes"),
    ("SET", "k", "not utf-8: \udcff\udcfe"),  # surrogateescape'd: redis-py's packer
    ("SET", "k", 1.5),  # floats: redis-py's repr
    ("SET", "k", 1e20),
    ("SET", "k", -3),
    ("SET", "k", 2**70),
    ("SET", "k", memoryview(b"view")),
    ("SET", "k", bytearray(b"array")),
    ("CONFIG GET", "maxmemory"),  # a command name with a space is split
    ("SET", "k", "x" * 200_000),  # over redis-py's buffer cutoff
]


def python_packed(conn: aioredis.Connection, args: tuple[Any, ...]) -> bytes:
    return b"".join(bytes(p) for p in aioredis.Connection.pack_command(conn, *args))


def test_hiredis_packing_is_byte_for_byte_redis_py(redis_url: str) -> None:
    """Every kind of argument packs to the bytes redis-py's own asyncio
    packer makes (hiredis where it agrees, redis-py's packer elsewhere), and
    what redis-py refuses (None, bool) is still refused."""
    client = async_client(redis_url)
    conn = client.connection_pool.make_connection()
    assert isinstance(conn, HiredisPacking)
    for args in ARGS:
        fast = b"".join(bytes(p) for p in conn.pack_command(*args))
        assert fast == python_packed(conn, args), args
    for bad in (None, True):
        with pytest.raises(Exception) as got:
            conn.pack_command("SET", "k", bad)
        with pytest.raises(type(got.value)):
            aioredis.Connection.pack_command(conn, "SET", "k", bad)
    sibling = sibling_async_client(client, socket_timeout=None)
    assert isinstance(sibling.connection_pool.make_connection(), HiredisPacking)


def test_values_round_trip_through_a_hiredis_packing_client(
    redis_url: str, qname: str
) -> None:
    """Values of every kind are stored as sent, and jobs added, read and
    updated through the fast client read back the same."""

    async def main() -> None:
        client = async_client(redis_url)
        for i, args in enumerate(ARGS):
            if args[0] != "SET":
                continue
            await client.set(f"{qname}:{i}", args[2])
            stored = await client.get(f"{qname}:{i}")
            sent = args[2]
            if isinstance(sent, (bytes, bytearray, memoryview)):
                expected = bytes(sent).decode("utf-8", "surrogateescape")
            elif isinstance(sent, float):
                expected = repr(sent)
            else:
                expected = str(sent)
            assert stored == expected, args
        q = AsyncQueue(qname, client)
        data = {"prompt": "ünïcödé \u2603", "n": 3, "x": 0.1, "big": "y" * 100_000}
        job = await q.add("render", data, priority=2)
        assert (await q.get_job(job.id)).data == data  # type: ignore[union-attr]
        await client.aclose()

    asyncio.run(main())


def test_a_workers_own_client_has_no_read_timeout_but_notices_dead_servers(
    redis_url: str,
) -> None:
    """A worker made from a URL reads without redis-py 8's 5 s per-command
    timeout (a timer and a task per command), and its sockets carry TCP
    keepalive and, on Linux, TCP_USER_TIMEOUT, so a dead server or network is
    still noticed; a socket_timeout in the URL wins; a client passed in is
    used as it is."""
    import socket

    from queues import AsyncWorker
    from queues.connection import worker_client

    async def noop(job: Any) -> None:
        return None

    async def main() -> None:
        worker = AsyncWorker("q", noop, connection=redis_url)
        client = worker.queue.client
        assert client.connection_pool.connection_kwargs["socket_timeout"] is None
        await client.ping()
        conn = client.connection_pool._available_connections[0]
        sock = conn._writer.get_extra_info("socket")
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        if hasattr(socket, "TCP_USER_TIMEOUT"):
            got = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT)
            assert got == 30_000
        await client.aclose()
        timed = worker_client(redis_url + "?socket_timeout=7")
        assert timed.connection_pool.connection_kwargs["socket_timeout"] == 7.0
        given = async_client(redis_url)  # 5 s reads: the caller's choice
        assert worker_client(given) is given
        await timed.aclose()
        await given.aclose()

    asyncio.run(main())


def test_a_worker_over_a_unix_socket_url_processes_jobs(tmp_path: Any) -> None:
    """A unix:// URL takes no TCP options: a worker made from one connects,
    blocks for jobs and finishes them."""
    from queues import AsyncWorker, Queue
    from queues.devredis import RedisServer

    sock = tmp_path / "redis.sock"
    server = RedisServer(extra_args=["--unixsocket", str(sock)]).start()
    try:
        url = f"unix://{sock}"
        q = Queue("viasocket", url)
        job = q.add("x", {"n": 2})

        async def double(job: Any) -> int:
            return int(job.data["n"]) * 2

        async def main() -> None:
            worker = AsyncWorker("viasocket", double, connection=url)
            task = asyncio.create_task(worker.run(install_signals=False))
            for _ in range(500):
                if q.get_job_state(job.id).value == "completed":
                    break
                await asyncio.sleep(0.01)
            worker.close()
            await asyncio.wait_for(task, 10)

        asyncio.run(main())
        assert q.get_job(job.id).returnvalue == 4
        q.close()
    finally:
        server.stop()
