"""How live updates fan out: a process reads what its sockets follow once,
whatever their number; with several dashboard processes each socket gets
each event exactly once; and no message type starting with `_` reaches a
handler (channels' rule), whether routed in the process or sent through the
channel layer."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
import redis
from channels.layers import get_channel_layer
from django.contrib.auth.models import User

from dashboard.console.live.access import session_group, user_group
from dashboard.console.live.consumers import handler_name
from dashboard.console.live.hub import get_hub
from queues import AsyncQueue, Queue
from tests.dashboard.daphne_helpers import LiveSocket, daphne, viewer_session
from tests.dashboard.live_helpers import (
    existing_queue,
    logged_in,
    next_message,
    receive_until,
    run,
    subscribed,
)


def test_handler_names() -> None:
    """Message types map to handlers named after them; a type starting with
    `_`, or one the socket does not handle, maps to none."""
    assert handler_name("queue.events") == "queue_events"
    assert handler_name("session.ended") == "session_ended"
    for kind in ("_end", "__init__", "_stop", "websocket.disconnect", "send", None):
        assert handler_name(kind) is None


@pytest.mark.django_db(transaction=True)
def test_a_type_starting_with_underscore_is_never_dispatched(
    live: str, viewer: User, qname: str
) -> None:
    """`_end` / `_stop` sent to the socket's groups (in the process, and
    through the channel layer to its user's and session's groups) neither
    close the socket nor stop its forwarding."""
    key = f"bull:{qname}"
    _, cookie = logged_in(viewer)
    session = session_group(cookie[1].decode().split("=", 1)[1])

    async def test() -> None:
        queue = await existing_queue(qname, live)
        comm = await subscribed(cookie, queues=[key])
        await receive_until(comm, lambda m: m["type"] == "counts")
        hub = get_hub()
        for kind in ("_end", "_stop", "__init__"):
            hub.route({"type": kind, "queue": key})
            hub.route({"type": kind, "group": session})
            for group in (session, user_group(viewer.pk)):
                await get_channel_layer().group_send(
                    group, {"type": kind, "group": group}
                )
        await asyncio.sleep(0.5)
        job = await queue.add("still-open", {})
        added = await receive_until(comm, lambda m: m.get("event") == "added")
        assert added["job"] == job.id
        await queue.close()

    run(test)


def _calls(client: redis.Redis) -> int:
    """Commands Redis has run so far (INFO commandstats, all of them)."""
    stats = client.info("commandstats")
    return sum(int(v["calls"]) for v in stats.values())


@pytest.mark.django_db(transaction=True)
def test_many_sockets_cost_no_more_redis_reads_than_one(
    live: str, viewer: User, qname: str
) -> None:
    """The same burst of events (and the same 2 s) costs Redis about as many
    commands with ten sockets following the queue as with one: sockets are
    served from the process's one read, and each socket gets every event."""
    key = f"bull:{qname}"
    _, cookie = logged_in(viewer)
    client = redis.Redis.from_url(live)

    async def phase(queue: AsyncQueue, sockets: int, jobs: list[Any]) -> int:
        comms = [await subscribed(cookie, queues=[key]) for _ in range(sockets)]
        for comm in comms:
            await receive_until(comm, lambda m: m["type"] == "counts")
        await asyncio.sleep(0.3)
        before, start = _calls(client), time.monotonic()
        for job in jobs:
            await job.update_progress({"sockets": sockets})
        for job in jobs:
            await queue.client.xadd(queue.keys.events, {"event": "x", "jobId": job.id})
        for comm in comms:
            got = 0
            while got < len(jobs):
                message = await next_message(comm)
                got += message.get("event") == "x"
        await asyncio.sleep(2.0 - (time.monotonic() - start))
        calls = _calls(client) - before
        for comm in comms:
            await comm.disconnect()
        return calls

    async def test() -> None:
        queue = await existing_queue(qname, live)
        jobs = [await queue.add("j", {}) for _ in range(20)]
        one = await phase(queue, 1, jobs)
        ten = await phase(queue, 10, jobs)
        # Per-socket reads would add 10 x 40 events; timing moves a few reads.
        assert ten <= one * 1.5 + 10, (one, ten)
        await queue.close()

    try:
        run(test)
    finally:
        client.close()


def test_two_dashboard_processes_send_each_event_once(
    tmp_path: Path, redis_url: str, qname: str
) -> None:
    """Two daphne servers on one Redis, a socket on each following the same
    queue: each socket gets every event of the stream exactly once (none
    lost, none twice) and the job's last progress."""
    key = f"bull:{qname}"
    db = str(tmp_path / "db.sqlite3")
    queue = Queue(qname, redis_url)
    queue.client.hset(queue.keys.meta, "opts.maxLenEvents", 10_000)
    with (
        daphne(tmp_path, redis_url, "a.log", BULLPEN_DB_PATH=db) as a,
        daphne(tmp_path, redis_url, "b.log", BULLPEN_DB_PATH=db) as b,
    ):
        session = viewer_session(a.env)

        async def test() -> None:
            socks = [await LiveSocket.open(s.url, session) for s in (a, b)]
            for sock in socks:
                sock.send({"type": "subscribe", "queues": [key]})
            for sock in socks:
                while (await asyncio.wait_for(sock.messages.get(), 10))[
                    "type"
                ] != "counts":
                    pass
            jobs = [await asyncio.to_thread(queue.add, "j", {}) for _ in range(5)]
            for i in range(1, 31):
                await asyncio.to_thread(jobs[i % 5].update_progress, i)
            last = await asyncio.to_thread(queue.add, "last", {})
            got: list[list[dict[str, Any]]] = []
            for sock in socks:
                seen = []
                while True:
                    message = await asyncio.wait_for(sock.messages.get(), 10)
                    seen.append(message)
                    if message.get("job") == last.id and message.get("event") == (
                        "waiting"
                    ):
                        break
                await asyncio.sleep(0.5)
                while not sock.messages.empty():
                    seen.append(sock.messages.get_nowait())
                got.append(seen)
                sock.close()
            stream = queue.client.xrange(queue.keys.events)
            events = [i for i, f in stream if f["event"] != "progress"]
            for seen in got:
                ids = [m["id"] for m in seen if m["type"] in ("event", "progress")]
                assert len(ids) == len(set(ids)), "an event arrived twice"
                assert [m["id"] for m in seen if m["type"] == "event"] == events
                latest = {
                    m["job"]: m["progress"] for m in seen if m["type"] == "progress"
                }
                assert latest == {
                    job.id: 26 + (k - 1) % 5 for k, job in enumerate(jobs)
                }

        asyncio.run(asyncio.wait_for(test(), 60))
    queue.close()


@pytest.mark.django_db(transaction=True)
def test_a_socket_forwards_every_progress_the_reader_let_through(
    live: str, viewer: User, qname: str
) -> None:
    """Progress is coalesced once, by the reader: two progress updates of one
    job that it let through and the hub hands a socket at once both reach
    the browser, in order (the socket leaves none out)."""
    key = f"bull:{qname}"
    _, cookie = logged_in(viewer)

    async def test() -> None:
        queue = await existing_queue(qname, live)
        comm = await subscribed(cookie, queues=[key])
        await receive_until(comm, lambda m: m["type"] == "counts")
        progress = [
            {"type": "progress", "queue": key, "job": "1", "progress": p}
            | {"id": f"{9_000_000_000_000 + p}-0"}
            for p in (1, 2)
        ]
        get_hub().route({"type": "queue.events", "queue": key, "events": progress})
        got = [
            await receive_until(comm, lambda m: m["type"] == "progress")
            for _ in progress
        ]
        assert [m["progress"] for m in got] == [1, 2]
        await queue.close()

    run(test)
