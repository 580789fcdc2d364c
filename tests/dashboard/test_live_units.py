"""The pieces of live updates that need no socket: the progress coalescer,
subscription parsing and the stream-entry messages."""

from __future__ import annotations

import pytest

from dashboard.console.live import messages, subscriptions
from dashboard.console.live.coalesce import Coalescer
from dashboard.console.live.hub import queue_group
from queues.events import StreamId, id_order


class Clock:
    """A hand-driven monotonic clock."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_coalescer_sends_first_holds_rest_latest_wins() -> None:
    """First update out at once; within the interval only the latest is kept
    and it goes out when the interval ends; other keys are independent."""
    clock = Clock()
    c = Coalescer(0.1, clock)
    assert c.offer("a", 1) == 1
    assert c.offer("a", 2) is None and c.offer("a", 3) is None
    assert c.offer("b", 10) == 10
    assert c.due() == [] and c.next_due_s() == pytest.approx(0.1)
    clock.now += 0.06
    assert c.next_due_s() == pytest.approx(0.04)
    clock.now += 0.05
    assert c.due() == [3] and len(c) == 0
    assert c.offer("a", 4) is None  # 3 just went out
    assert c.take("a") == 4 and c.take("a") is None
    c.forget("a")
    assert c.offer("a", 5) == 5


def test_coalescer_rate_over_a_second() -> None:
    """1000 updates in a second leave at most 11 sends (first + one per 100 ms)."""
    clock = Clock()
    c = Coalescer(0.1, clock)
    sent = []
    for i in range(1000):
        clock.now += 0.001
        if (out := c.offer("job", i)) is not None:
            sent.append(out)
        sent.extend(c.due())
    clock.now += 0.2
    sent.extend(c.due())
    assert len(sent) <= 11 and sent[-1] == 999


def test_subscription_parsing() -> None:
    """Allowed prefixes only; jobs split from the right; last ids kept only
    for followed queues and only when well formed."""
    sub = subscriptions.parse(
        {
            "queues": ["bull:render", "other:x", "bull:", 3],
            "jobs": ["bull:video:42", "bull:video:", "bull:video:a:b"],
            "gpus": True,
            "last_ids": {"bull:render": "1-2", "bull:video": "nope", "bull:z": "1-1"},
        },
        ["bull"],
    )
    assert sub.queues == {"bull:render"}
    assert sub.jobs == {("bull:video", "42")}
    assert sub.gpus is True
    assert sub.last_ids == {"bull:render": "1-2"}
    assert len(sub.rejected) == 5
    assert sub.streams == {"bull:render", "bull:video"}
    assert sub.wants("bull:video", "42") and not sub.wants("bull:video", "43")
    assert sub.wants("bull:render", None)


def test_subscription_caps() -> None:
    """A socket cannot make the reader follow unbounded lists."""
    with pytest.raises(subscriptions.SubscriptionError):
        subscriptions.parse({"queues": [f"bull:q{i}" for i in range(501)]}, ["bull"])
    with pytest.raises(subscriptions.SubscriptionError):
        subscriptions.parse({"queues": "bull:q"}, ["bull"])


def test_messages_from_entries() -> None:
    """Progress and events as the contract shapes them; long fields cut."""
    progress = messages.from_entry(
        "bull:q", "5-0", {"event": "progress", "jobId": "7", "data": '{"step":2}'}
    )
    assert progress == {
        "type": "progress",
        "queue": "bull:q",
        "job": "7",
        "progress": {"step": 2},
        "id": "5-0",
    }
    failed = messages.from_entry(
        "bull:q",
        "6-0",
        {"event": "failed", "jobId": "7", "failedReason": "x" * 5000, "prev": "active"},
    )
    assert failed["type"] == "event" and failed["event"] == "failed"
    assert failed["prev"] == "active" and len(failed["failedReason"]) == 2001
    drained = messages.from_entry("bull:q", "7-0", {"event": "drained"})
    assert drained["job"] is None


def test_collapse_keeps_latest_progress_between_events() -> None:
    """Replays keep one progress per job between that job's other events."""

    def p(job: str, n: int) -> dict:
        return {"type": "progress", "job": job, "progress": n}

    done = {"type": "event", "job": "a", "event": "completed"}
    got = messages.collapse_progress(
        [p("a", 1), p("b", 1), p("a", 2), done, p("a", 3), p("b", 2)]
    )
    assert got == [p("a", 2), done, p("a", 3), p("b", 2)]


def test_ids_order_like_redis() -> None:
    """Stream ids compare numerically, sequence second."""
    assert id_order("10-0") > id_order("9-99")
    assert id_order("10-10") > id_order("10-9")
    assert StreamId.valid("1-0") and not StreamId.valid("1")
    assert queue_group("bull:a").startswith("q.")
    assert len(queue_group("bull:a")) == 42


def test_counts_of_all_queues_at_once_and_a_broken_one_alone(redis_url: str) -> None:
    """The reader's counts: every followed queue in one read; a queue whose
    keys answer an error gets that error, and the others their counts."""
    import asyncio

    import redis.asyncio as aioredis

    from dashboard.console.live.snapshots import read_counts
    from queues.keys import QueueKeys

    async def test() -> None:
        client = aioredis.Redis.from_url(redis_url, decode_responses=True)
        await client.lpush("bull:a:wait", "1")
        await client.hset("bull:a:meta", "paused", "1")
        ok, missing = QueueKeys("a", "bull"), QueueKeys("c", "bull")
        found = await read_counts(client, [ok, missing])
        assert found[0][0]["waiting"] == 1 and found[0][1] is True
        assert found[1][0]["waiting"] == 0 and found[1][1] is False
        await client.set("bull:b:active", "not a list")
        found = await read_counts(client, [ok, QueueKeys("b", "bull"), missing])
        assert isinstance(found[1], Exception)
        assert found[0][0]["waiting"] == 1 and found[2][1] is False
        await client.aclose()

    asyncio.run(test())


def test_sockets_connecting_at_once_join_a_shared_group_once(redis_url: str) -> None:
    """200 sockets of one session connecting together: the hub joins the
    session's and the user's channel-layer groups once each. (One group_add
    per socket ran past redis-py 8's 100-connection pool default in
    channels-redis: MaxConnectionsError inside connect, daphne's 500.)"""
    import asyncio

    from channels_redis.core import RedisChannelLayer

    from dashboard.channel_layers import channel_layer_host
    from dashboard.console.live.hub import Hub

    class Socket:
        def deliver(self, message: dict) -> None:
            pass

    async def test() -> None:
        layer = RedisChannelLayer(hosts=[channel_layer_host(redis_url)])
        added: list[str] = []
        group_add = layer.group_add

        async def counted(group: str, channel: str) -> None:
            added.append(group)
            await group_add(group, channel)

        layer.group_add = counted  # type: ignore[method-assign]
        hub = Hub(layer)
        sockets = [Socket() for _ in range(200)]
        await asyncio.gather(
            *(hub.join_shared(g, s) for s in sockets for g in ("s.abc", "u.1"))
        )
        assert sorted(added) == ["s.abc", "u.1"]
        assert all(len(hub.members[g]) == 200 for g in ("s.abc", "u.1"))
        for s in sockets:
            await hub.leave("s.abc", s)
        assert hub.shared == {"u.1"} and "s.abc" not in hub.members
        await hub.stop()
        await layer.close_pools()

    asyncio.run(test())
