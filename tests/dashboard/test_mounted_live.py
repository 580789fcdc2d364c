"""The live socket of a dashboard mounted by a host project: the host's own
ProtocolTypeRouter (tests/hostproject/asgi.py) routes /ops/queues/ws/live/ to
it through the one line docs/embedding.md gives, with session auth, the events
reader and the channel layer on the real test Redis; a host without
CHANNEL_LAYERS still gets its sockets closed at logout."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User

from dashboard.console.live.access import CLOSE_UNAUTHENTICATED
from dashboard.console.live.hub import _memory_layer
from tests.dashboard import live_helpers
from tests.dashboard.live_helpers import (
    ORIGIN,
    existing_queue,
    logged_in,
    receive_until,
    run,
)

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.urls("tests.hostproject.urls"),
]

SOCKET = "/ops/queues/ws/live/"


def host_socket(path: str, *headers: tuple[bytes, bytes]) -> WebsocketCommunicator:
    """A communicator on the host project's ASGI application (closed by run())."""
    from tests.hostproject.asgi import application

    comm = WebsocketCommunicator(application, path, headers=list(headers))
    live_helpers._open.append(comm)
    return comm


def test_the_socket_answers_under_the_prefix_only(
    live: str, viewer: User, qname: str
) -> None:
    """A viewer's socket under /ops/queues/ follows a queue; an anonymous one
    there is refused as at the root; /ws/live/ is no route of the host."""
    _, cookie = logged_in(viewer)
    key = f"bull:{qname}"

    async def test() -> None:
        queue = await existing_queue(qname, live)
        comm = host_socket(SOCKET, ORIGIN, cookie)
        assert (await comm.connect())[0]
        await comm.send_json_to({"type": "subscribe", "queues": [key]})
        await receive_until(comm, lambda m: m["type"] == "counts")
        await queue.add("render", {})
        added = await receive_until(comm, lambda m: m.get("event") == "added")
        assert added["queue"] == key
        anonymous = host_socket(SOCKET, ORIGIN)
        assert await anonymous.connect() == (False, CLOSE_UNAUTHENTICATED)
        with pytest.raises(ValueError, match="No route found"):
            await host_socket("/ws/live/", ORIGIN, cookie).connect()
        await queue.close()

    run(test)


def test_logout_closes_sockets_without_channel_layers(
    live: str, viewer: User, settings: Any
) -> None:
    """With no CHANNEL_LAYERS (bullpen.W002), the control messages go through
    one in-memory layer per process: logging out under the prefix closes the
    user's socket at once, as 4401."""
    settings.CHANNEL_LAYERS = {}
    client, cookie = logged_in(viewer)

    async def test() -> None:
        comm = host_socket(SOCKET, ORIGIN, cookie)
        assert (await comm.connect())[0]
        await comm.send_json_to({"type": "subscribe", "queues": []})
        out = await sync_to_async(client.post)("/ops/queues/logout/")
        assert out["Location"] == "/ops/queues/login/"
        said = await comm.receive_json_from(timeout=5)
        assert said["type"] == "error" and "session ended" in said["message"]
        closed = await comm.receive_output(timeout=5)
        assert closed == {"type": "websocket.close", "code": CLOSE_UNAUTHENTICATED}

    try:
        run(test)
    finally:
        _memory_layer.cache_clear()
