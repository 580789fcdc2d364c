"""The live socket end to end: dashboard.asgi.application (Origin check, session
auth, consumer) with the events reader and channels-redis on the real test Redis."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from django.contrib.auth.models import User

from dashboard.console.live import defaults
from dashboard.console.live.access import user_group
from dashboard.console.live.hub import get_hub, queue_group
from dashboard.console.live.reader import get_reader
from queues import AsyncQueue
from tests.dashboard.live_helpers import (
    ORIGIN,
    close_all,
    drain,
    existing_queue,
    following,
    next_message,
    open_socket,
    receive_until,
    run,
    session_cookie,
    subscribed,
)

pytestmark = pytest.mark.django_db(transaction=True)


def test_socket_without_session_is_refused(live: str) -> None:
    """An anonymous socket never gets accepted."""

    async def test() -> None:
        comm = await open_socket(ORIGIN)
        connected, code = await comm.connect()
        assert not connected
        assert code == 4401
        await comm.disconnect()

    run(test)


def test_socket_from_foreign_origin_is_refused(live: str, viewer: User) -> None:
    """A logged-in session from a page of another site is refused (CSRF on ws)."""

    cookie_viewer = session_cookie(viewer)

    async def test() -> None:
        comm = await open_socket((b"origin", b"http://evil.example"), cookie_viewer)
        connected, _ = await comm.connect()
        assert not connected
        comm = await open_socket(cookie_viewer)  # no Origin at all
        connected, _ = await comm.connect()
        assert not connected

    run(test)


def test_user_without_view_permission_is_refused(live: str) -> None:
    """Logging in is not enough: the view permission is needed."""
    nobody = User.objects.create_user("nobody", password="x")

    cookie_nobody = session_cookie(nobody)

    async def test() -> None:
        comm = await open_socket(ORIGIN, cookie_nobody)
        connected, code = await comm.connect()
        assert not connected
        assert code == 4403

    run(test)


# --- what arrives --------------------------------------------------------------------
def test_counts_events_and_progress_arrive(live: str, viewer: User, qname: str) -> None:
    """A followed queue's counts, job events and progress reach the browser."""
    key = f"bull:{qname}"

    cookie_viewer = session_cookie(viewer)

    async def test() -> None:
        queue = await existing_queue(qname, live)
        comm = await subscribed(cookie_viewer, queues=[key])
        first = await receive_until(comm, lambda m: m["type"] == "counts")
        assert first["counts"]["waiting"] == 0
        job = await queue.add("render", {"steps": 3})
        added = await receive_until(comm, lambda m: m.get("event") == "added")
        assert (
            added["queue"] == key
            and added["job"] == job.id
            and added["name"] == "render"
        )
        counts = await receive_until(
            comm, lambda m: m["type"] == "counts" and m["counts"]["waiting"] == 1
        )
        assert counts["queue"] == key and counts["paused"] is False
        await job.update_progress(37)
        progress = await receive_until(comm, lambda m: m["type"] == "progress")
        assert progress == {
            "type": "progress",
            "queue": key,
            "job": job.id,
            "progress": 37,
            "id": progress["id"],
        }
        await job.update_progress({"step": 2, "of": 3})
        progress = await receive_until(comm, lambda m: m["type"] == "progress")
        assert progress["progress"] == {"step": 2, "of": 3}
        await queue.pause()
        paused = await receive_until(comm, lambda m: m["type"] == "counts")
        assert paused["paused"] is True
        await comm.disconnect()
        await queue.close()

    run(test)


def test_job_subscription_gets_only_that_job(
    live: str, viewer: User, qname: str
) -> None:
    """A job page follows one job; other jobs of its queue are not sent."""
    key = f"bull:{qname}"

    cookie_viewer = session_cookie(viewer)

    async def test() -> None:
        queue = AsyncQueue(qname, live)
        mine = await queue.add("a", {})
        other = await queue.add("b", {})
        comm = await subscribed(cookie_viewer, jobs=[f"{key}:{mine.id}"])
        await following(key)
        await other.update_progress(10)
        await mine.update_progress(20)
        got = await receive_until(comm, lambda m: m["type"] == "progress")
        assert got["job"] == mine.id and got["progress"] == 20
        rest = await drain(comm, 0.3)
        assert all(m.get("job") in (None, mine.id) for m in rest)
        assert not [m for m in rest if m["type"] == "counts"]
        await queue.close()

    run(test)


def test_an_idle_followed_job_still_gets_its_next_event_at_once(
    live: str, viewer: User, qname: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Nothing arrives for longer than channels-redis's 5 s receive and
    redis-py's default 5 s read timeout: the hub must not fail (and back off)
    on that idle receive (no "live hub" warning, the check that does not
    depend on the machine's speed), and the job's next progress arrives."""
    key = f"bull:{qname}"
    cookie_viewer = session_cookie(viewer)

    async def test() -> None:
        queue = AsyncQueue(qname, live)
        job = await queue.add("a", {})
        comm = await subscribed(cookie_viewer, jobs=[f"{key}:{job.id}"])
        await drain(comm, 6.5)  # idle: the hub's receive outlasts 5 s
        await job.update_progress(42)
        got = await receive_until(comm, lambda m: m["type"] == "progress")
        assert got["progress"] == 42
        await queue.close()

    with caplog.at_level("WARNING", logger="dashboard.console.live"):
        run(test)
    assert not [r for r in caplog.records if "live hub" in r.getMessage()]


def test_bad_subscriptions_are_refused_not_followed(live: str, viewer: User) -> None:
    """Queues under prefixes the dashboard does not serve are never read."""

    cookie_viewer = session_cookie(viewer)

    async def test() -> None:
        comm = await open_socket(ORIGIN, cookie_viewer)
        await comm.connect()
        await comm.send_json_to(
            {"type": "subscribe", "queues": ["secret:thing", "bull:a:b", 7]}
        )
        errors = [await next_message(comm) for _ in range(3)]
        assert all(e["type"] == "error" for e in errors)
        assert get_reader().followed == {}
        await comm.send_json_to({"type": "hello"})
        assert (await next_message(comm))["type"] == "error"

    run(test)


def test_progress_is_coalesced_to_ten_a_second(
    live: str, viewer: User, qname: str
) -> None:
    """A job reporting 200 times in a second reaches a client at most 10 times
    a second, and the last value it reported is what the client ends with.
    The rate is bounded from the moment the first report was sent to the
    last arrival, which no delay on a busy machine can make look faster; the
    100 ms spacing of each send is pinned with a controlled clock in
    test_live_units (the gaps between arrivals here are the machine's
    scheduling, not the sender's spacing)."""
    key = f"bull:{qname}"

    cookie_viewer = session_cookie(viewer)

    async def test() -> None:
        queue = AsyncQueue(qname, live)
        job = await queue.add("spam", {})
        comm = await subscribed(cookie_viewer, queues=[key])
        await following(key)
        # Until the last value arrives (a loaded machine may take > 2 s).
        listening = asyncio.create_task(
            drain(comm, 15.0, lambda m: m.get("progress") == 200)
        )
        start = time.monotonic()
        for i in range(1, 201):
            await job.update_progress(i)
            await asyncio.sleep(0.005)
        got = [m for m in await listening if m["type"] == "progress"]
        assert got, "no progress arrived"
        assert got[-1]["progress"] == 200
        assert not [m for m in await drain(comm, 0.3) if m["type"] == "progress"]
        window = got[-1]["_at"] - start
        assert len(got) <= window * 10 + 1, (len(got), window)
        values = [m["progress"] for m in got]
        assert values == sorted(values)
        await queue.close()

    run(test)


def test_reconnect_resumes_from_last_id(live: str, viewer: User, qname: str) -> None:
    """A browser that comes back with its last id is sent what it missed."""
    key = f"bull:{qname}"

    cookie_viewer = session_cookie(viewer)

    async def test() -> None:
        queue = await existing_queue(qname, live)
        comm = await subscribed(cookie_viewer, queues=[key])
        await following(key)
        first = await queue.add("before", {})
        # Its last id is that of the job's `waiting`, which follows `added`.
        seen = await receive_until(comm, lambda m: m.get("event") == "waiting")
        assert seen["job"] == first.id
        await comm.disconnect()

        missed = [await queue.add("while-away", {"n": i}) for i in range(3)]
        await missed[0].update_progress(50)
        await missed[0].update_progress(60)

        comm = await subscribed(cookie_viewer, queues=[key], last_ids={key: seen["id"]})
        got = []
        while True:
            message = await next_message(comm)
            if message["type"] == "replayed":
                break
            got.append(message)
        assert message == {
            "type": "replayed",
            "queue": key,
            "count": len(got),
            "truncated": False,
        }
        added = [m["job"] for m in got if m.get("event") == "added"]
        assert added == [j.id for j in missed]
        assert first.id not in {m.get("job") for m in got}
        assert all(m["replayed"] for m in got)
        progress = [m for m in got if m["type"] == "progress"]
        assert [p["progress"] for p in progress] == [60]  # latest wins
        # Live events after the replay arrive once, not twice.
        late = await queue.add("after", {})
        rest = await drain(comm, 0.5)
        assert [m["job"] for m in rest if m.get("event") == "added"] == [late.id]
        await queue.close()

    run(test)


def test_replay_is_bounded(
    live: str, viewer: User, qname: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Far behind, a browser gets only the newest events, told they were cut."""
    monkeypatch.setattr(defaults, "REPLAY_MAX_EVENTS", 5)
    key = f"bull:{qname}"

    cookie_viewer = session_cookie(viewer)

    async def test() -> None:
        queue = AsyncQueue(qname, live)
        first = await queue.add("first", {})
        stream = await queue.client.xrange(queue.keys.events)
        after = stream[-1][0]
        jobs = [await queue.add("j", {"n": i}) for i in range(20)]
        comm = await subscribed(cookie_viewer, queues=[key], last_ids={key: after})
        got = []
        while (message := await next_message(comm))["type"] != "replayed":
            got.append(message)
        assert message["truncated"] is True and message["count"] == len(got) <= 5
        assert got[-1]["job"] == jobs[-1].id and first.id not in [m["job"] for m in got]
        await queue.close()

    run(test)


def test_gpus_subscription_gets_what_changed_in_the_fleet(
    live: str, viewer: User
) -> None:
    """Following the GPUs sends, after a heartbeat, what changed since the
    last message (live/snapshots.py): the workers running per host and queue,
    the hosts whose workers changed, the summary; a worker that fails sends
    its count back to 0, and nothing of what did not change."""
    from gpu_workers.heartbeat import queue_heartbeat
    from gpu_workers.keys import BullpenKeys
    from queues.connection import sync_from_url

    cookie_viewer = session_cookie(viewer)

    def publish(state: str) -> None:
        client = sync_from_url(live, decode_responses=True)  # a cluster's too
        pipe = client.pipeline()
        record = {
            "id": "h1:bull:gpu:GPU-1",
            "host": "h1",
            "queue": "gpu",
            "state": state,
        }
        queue_heartbeat(pipe, BullpenKeys(), "worker", record["id"], record, 10)
        pipe.execute()
        client.close()

    async def test() -> None:
        comm = await open_socket(ORIGIN, cookie_viewer)
        await comm.connect()
        await comm.send_json_to({"type": "subscribe", "gpus": True})
        await following(gpus=True)
        # A socket's first workers message: the version and summary alone,
        # of a read made before the heartbeat below.
        hello = await receive_until(
            comm, lambda m: m["type"] == "workers" and m["base"] is None, timeout=8
        )
        assert hello["cells"] == [] and hello["running"] == {}
        publish("idle")
        got = await receive_until(
            comm, lambda m: m["type"] == "workers" and m["running"], timeout=8
        )
        # The GPU page's Running column, per host/queue (failed ones left out).
        assert got["running"] == {"h1/bull:gpu": 1}
        assert got["hosts"] == ["h1"] and got["cells"] == [] and got["gone"] == []
        assert got["summary"]["workers"] == 1 and got["base"] is not None
        assert got["version"] > got["base"]
        publish("failed")
        then = await receive_until(
            comm, lambda m: m["type"] == "workers" and m["running"], timeout=8
        )
        assert then["running"] == {"h1/bull:gpu": 0}
        assert then["base"] == got["version"]
        assert then["summary"]["failed_workers"] == 1

    run(test)


def test_one_reader_serves_many_sockets(live: str, viewer: User, qname: str) -> None:
    """Five sockets on one queue: the reader follows it once, reads its counts
    once a second, and sends each batch to the group once."""
    key = f"bull:{qname}"

    cookie_viewer = session_cookie(viewer)

    async def test() -> None:
        queue = await existing_queue(qname, live)
        socks = []
        for _ in range(5):
            comm = await open_socket(ORIGIN, cookie_viewer)
            await comm.connect()
            await comm.send_json_to({"type": "subscribe", "queues": [key]})
            socks.append(comm)
        await following(key, sockets=5)
        reader = get_reader()
        assert list(reader.followed) == [key] and reader.followed[key].refs == 5
        before = reader.stats.group_sends
        job = await queue.add("x", {})
        for comm in socks:
            got = await receive_until(comm, lambda m: m.get("event") == "added")
            assert got["job"] == job.id
        # added + waiting arrive in one XREAD batch, or at most two; the hub
        # is the only group member, receiving each batch once for all five.
        assert reader.stats.group_sends - before <= 3
        hub = get_hub()
        mine = {queue_group(key), user_group(viewer.pk)}
        session = next(g for g in hub.members if g not in mine)
        assert sorted(hub.members) == sorted([*mine, session])
        # One queue, one user, one session: five sockets in each group.
        assert all(len(found) == 5 for found in hub.members.values())
        await close_all(socks)
        assert reader.followed == {} and hub.members == {}
        await queue.close()

    run(test)


def test_subscribe_while_redis_is_down_closes_try_again_and_leaks_nothing(
    live: str, viewer: User, settings: Any
) -> None:
    """The reader's Redis is dead: the socket gets an error saying so and a
    1013 close (the browser reconnects with backoff), and no group
    membership is left behind in the hub."""
    from tests.redis_server import free_port

    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens
    cookie_viewer = session_cookie(viewer)

    async def test() -> None:
        comm = await subscribed(cookie_viewer, queues=["bull:down"])
        message = await next_message(comm)
        assert message["type"] == "error"
        assert message["message"].startswith("Redis is not answering")
        closed = await comm.receive_output(timeout=5)
        assert closed == {"type": "websocket.close", "code": 1013}
        assert not get_hub().members.get(queue_group("bull:down"))

    run(test)
