"""Who keeps a live socket, and how much it may follow: logging out and losing
the view permission close open sockets; only queues that exist are followed,
at most so many per socket and per process. The real ASGI application, the
events reader and channels-redis on the real test Redis."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Group, Permission, User

from dashboard.console.live import defaults
from dashboard.console.live.reader import get_reader
from dashboard.console.models import VIEW
from tests.dashboard.live_helpers import (
    drain,
    existing_queue,
    logged_in,
    next_message,
    receive_until,
    run,
    session_cookie,
    subscribed,
)

pytestmark = pytest.mark.django_db(transaction=True)


async def closed_with(comm: WebsocketCommunicator) -> tuple[list[Any], int]:
    """The messages a socket got before the server closed it, and the code."""
    got = []
    while True:
        out = await comm.receive_output(timeout=5)
        if out["type"] == "websocket.close":
            return got, out["code"]
        got.append(out.get("text"))


def test_logout_closes_that_sessions_sockets(
    live: str, viewer: User, qname: str
) -> None:
    """Logging out closes the session's open sockets at once (4401, saying
    why), and they get nothing more; another session's socket stays open."""
    client, cookie = logged_in(viewer)
    other_cookie = session_cookie(viewer)
    key = f"bull:{qname}"

    async def test() -> None:
        queue = await existing_queue(qname, live)
        comm = await subscribed(cookie, queues=[key])
        other = await subscribed(other_cookie, queues=[key])
        # Both subscribes have taken effect (a busy machine had not yet done
        # the other's when the job below was added).
        for sock in (comm, other):
            await receive_until(sock, lambda m: m["type"] == "counts")
        response = await database_sync_to_async(client.post)("/logout/")
        assert response.status_code == 302
        got, code = await closed_with(comm)
        assert code == 4401
        assert any("logged out" in text for text in got)
        job = await queue.add("after-logout", {})
        added = await receive_until(other, lambda m: m.get("event") == "added")
        assert added["job"] == job.id
        assert get_reader().followed[key].refs == 1  # the closed one let go
        await queue.close()

    run(test)


def test_removed_permission_closes_at_the_next_subscribe(
    live: str, viewer: User, qname: str
) -> None:
    """A subscribe checks the permission again: removed since connecting,
    the socket is closed with 4403 and follows nothing."""
    cookie = session_cookie(viewer)
    key = f"bull:{qname}"

    async def test() -> None:
        queue = await existing_queue(qname, live)
        comm = await subscribed(cookie, queues=[key])
        await receive_until(comm, lambda m: m["type"] == "counts")
        await database_sync_to_async(viewer.user_permissions.clear)()
        await comm.send_json_to({"type": "subscribe", "queues": [key]})
        got, code = await closed_with(comm)
        assert code == 4403
        assert any("may no longer view" in text for text in got)
        assert get_reader().followed == {}
        await queue.close()

    run(test)


def test_removed_permission_closes_a_quiet_socket(
    live: str, viewer: User, qname: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A socket that never subscribes again is closed by its periodic check,
    and streams nothing after its permission went."""
    monkeypatch.setattr(defaults, "ACCESS_RECHECK_S", 0.2)
    cookie = session_cookie(viewer)
    key = f"bull:{qname}"

    async def test() -> None:
        queue = await existing_queue(qname, live)
        comm = await subscribed(cookie, queues=[key])
        await receive_until(comm, lambda m: m["type"] == "counts")
        await asyncio.sleep(0.5)  # checks that pass keep it open
        assert await comm.receive_nothing(timeout=0.1)
        await database_sync_to_async(viewer.user_permissions.clear)()
        got, code = await closed_with(comm)
        assert code == 4403
        assert get_reader().followed == {}
        await queue.close()

    run(test)


def test_only_queues_that_exist_are_followed(
    live: str, viewer: User, qname: str, settings: Any
) -> None:
    """A queue with no key in Redis is refused with a message (a configured
    queue is followed before it exists, as pages show it)."""
    settings.BULLPEN_QUEUES = [f"bull:{qname}-configured"]
    cookie = session_cookie(viewer)
    real, missing, configured = (
        f"bull:{qname}",
        f"bull:{qname}-missing",
        f"bull:{qname}-configured",
    )

    async def test() -> None:
        queue = await existing_queue(qname, live)
        comm = await subscribed(
            cookie,
            queues=[real, missing],
            jobs=[f"{configured}:1", f"{missing}:7"],
        )
        error = await receive_until(comm, lambda m: m["type"] == "error")
        assert error["message"] == f"no queue {missing}: not followed"
        await drain(comm, 0.3)
        assert sorted(get_reader().followed) == sorted([real, configured])
        await queue.close()

    run(test)


def test_queues_per_socket_are_capped(
    live: str, viewer: User, qname: str, settings: Any
) -> None:
    """More queues than BULLPEN_LIVE_MAX_QUEUES_PER_SOCKET (counting the
    queues of followed jobs) is refused whole, saying so."""
    settings.BULLPEN_LIVE_MAX_QUEUES_PER_SOCKET = 2
    cookie = session_cookie(viewer)
    keys = [f"bull:{qname}-{i}" for i in range(3)]

    async def test() -> None:
        queues = [await existing_queue(k.split(":")[1], live) for k in keys]
        comm = await subscribed(cookie, queues=keys[:2], jobs=[f"{keys[2]}:1"])
        error = await next_message(comm)
        assert error["type"] == "error"
        assert "asks to follow 3 queues" in error["message"]
        assert "at most 2 (BULLPEN_LIVE_MAX_QUEUES_PER_SOCKET)" in error["message"]
        assert get_reader().followed == {}
        await comm.send_json_to({"type": "subscribe", "queues": keys[:2]})
        await receive_until(comm, lambda m: m["type"] == "counts")
        assert sorted(get_reader().followed) == keys[:2]
        for q in queues:
            await q.close()

    run(test)


def test_queues_per_process_are_capped(
    live: str, viewer: User, qname: str, settings: Any
) -> None:
    """Past BULLPEN_LIVE_MAX_QUEUES_PER_PROCESS the reader follows no new
    queue: that socket is told which queue was refused and why, and still
    gets the queues already followed."""
    settings.BULLPEN_LIVE_MAX_QUEUES_PER_PROCESS = 2
    cookie = session_cookie(viewer)
    keys = [f"bull:{qname}-{i}" for i in range(3)]

    async def test() -> None:
        queues = [await existing_queue(k.split(":")[1], live) for k in keys]
        first = await subscribed(cookie, queues=keys[:2])
        await receive_until(first, lambda m: m["type"] == "counts")
        second = await subscribed(cookie, queues=[keys[0], keys[2]])
        error = await receive_until(second, lambda m: m["type"] == "error")
        assert error["message"].startswith(f"not following {keys[2]}: ")
        assert "BULLPEN_LIVE_MAX_QUEUES_PER_PROCESS" in error["message"]
        assert sorted(get_reader().followed) == keys[:2]
        job = await queues[0].add("x", {})
        added = await receive_until(second, lambda m: m.get("event") == "added")
        assert added["job"] == job.id
        for q in queues:
            await q.close()

    run(test)


@pytest.mark.parametrize("how", ["user", "group", "deactivate"])
def test_taking_access_away_closes_sockets_at_once(
    live: str, qname: str, how: str
) -> None:
    """Removing the user's permission, the permission from the user's group,
    or deactivating the user closes their sockets in well under the periodic
    check's 30 s; a change that keeps the access keeps them open."""
    user = User.objects.create_user("grouped", password="x")
    group = Group.objects.create(name=f"g-{how}")
    view = Permission.objects.get(codename=VIEW.split(".")[1])
    group.permissions.add(view)
    user.groups.add(group)
    if how == "user":
        user.user_permissions.add(view)
        group.permissions.remove(view)
    cookie = session_cookie(user)
    key = f"bull:{qname}"

    def take_away() -> None:
        if how == "user":
            user.user_permissions.remove(view)
        elif how == "group":
            group.permissions.remove(view)
        else:
            user.is_active = False
            user.save()

    async def test() -> None:
        queue = await existing_queue(qname, live)
        comm = await subscribed(cookie, queues=[key])
        await receive_until(comm, lambda m: m["type"] == "counts")
        other = Permission.objects.exclude(codename=view.codename).first
        await database_sync_to_async(lambda: user.user_permissions.remove(other()))()
        assert await comm.receive_nothing(timeout=0.5)  # still allowed
        await database_sync_to_async(take_away)()
        _, code = await asyncio.wait_for(closed_with(comm), 3)
        assert code == (4401 if how == "deactivate" else 4403)
        assert get_reader().followed == {}
        await queue.close()

    run(test)
