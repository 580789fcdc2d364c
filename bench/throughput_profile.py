"""Where a single add's client time goes: CPU per add (process time, the best
of 7 loops of 2,000 adds), sync and async, on a redis-server started here.

    .venv/bin/python bench/throughput_profile.py [--root OTHER_CHECKOUT]

Each row runs one layer of the add alone, so the layers can be subtracted:
Bullpen's preparation of the job (`_prepare`), redis-py's `Script` call and
`execute_command` (its pool checkout and release, retry wrapper, hooks),
hiredis packing and parsing, the round trip on a connection held open, and
the lean path of queues/hotpath.py where the checkout has one. `--root`
profiles another checkout's `queues` (e.g. main's, exported with
`git archive`) with the same code.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LOOPS, N = 7, 2000


def per_call(fn: Callable[[], Any]) -> float:
    """CPU us per call of fn: the best of LOOPS loops of N calls."""
    best = []
    for _ in range(LOOPS):
        t = time.process_time()
        for _ in range(N):
            fn()
        best.append((time.process_time() - t) / N * 1e6)
    return min(best)


async def per_await(fn: Callable[[], Awaitable[Any]]) -> float:
    """`per_call` for a coroutine function."""
    best = []
    for _ in range(LOOPS):
        t = time.process_time()
        for _ in range(N):
            await fn()
        best.append((time.process_time() - t) / N * 1e6)
    return min(best)


def sync_rows(url: str) -> dict[str, float]:
    """The sync layers of one add."""
    import hiredis

    from queues import Queue

    q = Queue("profile", connection=url)
    for _ in range(100):
        q.add("warm", {})
    call, _ = q._prepare("noop", {}, {})
    script = q.scripts.add_standard_job
    args = ("EVALSHA", script.sha, len(call.keys), *call.keys, *call.args)
    pool = q.client.connection_pool
    conn = pool.get_connection()

    def round_trip() -> None:
        conn.send_packed_command(conn.pack_command(*args))
        conn.read_response()

    def parse() -> None:
        reader = hiredis.Reader(encoding="utf-8")
        reader.feed(b"$4\r\n1234\r\n")
        reader.gets()

    def checkout() -> None:
        pool.release(pool.get_connection())

    rows = {
        "sync Queue.add": per_call(lambda: q.add("noop", {})),
        "  Bullpen's preparation (_prepare)": per_call(
            lambda: q._prepare("noop", {}, {})
        ),
        "  redis-py Script() call": per_call(lambda: script(call.keys, call.args)),
        "  redis-py execute_command(EVALSHA ...)": per_call(
            lambda: q.client.execute_command(*args)
        ),
        "  redis-py pool checkout + release": per_call(checkout),
        "  redis-py retry wrapper (empty body)": per_call(
            lambda: conn.retry.call_with_retry(lambda: None, lambda e: None)
        ),
        "  pack (hiredis)": per_call(lambda: conn.pack_command(*args)),
        "  parse one reply (hiredis)": per_call(parse),
        "  round trip on a held connection": per_call(round_trip),
    }
    adds = getattr(q, "adds", None)
    if adds is not None:
        rows["  lean path (queues/hotpath.py)"] = per_call(lambda: adds.call(call))
    pool.release(conn)
    q.close()
    return rows


async def async_rows(url: str) -> dict[str, float]:
    """The asyncio layers of one add."""
    from queues import AsyncQueue

    q = AsyncQueue("profile-async", connection=url)
    for _ in range(100):
        await q.add("warm", {})
    call, _ = q._prepare("noop", {}, {})
    script = q.scripts.add_standard_job
    args = ("EVALSHA", script.sha, len(call.keys), *call.keys, *call.args)
    pool = q.client.connection_pool
    conn = await pool.get_connection()

    async def add() -> None:
        await q.add("noop", {})

    async def scripted() -> None:
        await script(call.keys, call.args)

    async def executed() -> None:
        await q.client.execute_command(*args)

    async def checkout() -> None:
        await pool.release(await pool.get_connection())

    async def round_trip() -> None:
        await conn.send_packed_command(conn.pack_command(*args))
        await conn.read_response()

    rows = {
        "async AsyncQueue.add": await per_await(add),
        "  redis-py Script() call (async)": await per_await(scripted),
        "  redis-py execute_command (async)": await per_await(executed),
        "  redis-py pool checkout + release (async)": await per_await(checkout),
        "  round trip on a held connection (async)": await per_await(round_trip),
    }
    adds = getattr(q, "adds", None)
    if adds is not None:

        async def lean() -> None:
            await adds.call(call)

        rows["  lean path (queues/hotpath.py, async)"] = await per_await(lean)
    await pool.release(conn)
    await q.close()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from queues.devredis import interrupt_on_sigterm
    from tests.redis_server import RedisServer

    interrupt_on_sigterm()  # a killed run still stops its redis-server

    sys.path.insert(0, str(args.root.resolve()))
    for name in [m for m in sys.modules if m == "queues" or m.startswith("queues.")]:
        del sys.modules[name]  # tests.redis_server imported this checkout's
    server = RedisServer().start()
    try:
        rows = sync_rows(server.url)
        rows.update(asyncio.run(async_rows(server.url)))
    finally:
        server.stop()
    print(f"client CPU per add (us), best of {LOOPS} x {N}, {args.root}")
    for label, us in rows.items():
        print(f"{label:46s} {us:7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
