"""What the live-socket tests share: the `live` and `viewer` fixtures (used
through tests/dashboard/conftest.py), sockets on the real ASGI application, and
reading their messages."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Permission, User
from django.test import Client

from dashboard.channel_layers import channel_layer_host
from dashboard.console import reads
from dashboard.console.live.hub import reset_hub
from dashboard.console.live.reader import get_reader, reset_reader
from queues import AsyncQueue

ORIGIN = (b"origin", b"http://127.0.0.1:8000")


@pytest.fixture
def live(settings: Any, redis_url: str) -> Iterator[str]:
    """Point Redis, the channel layer and the reader at the test server."""
    settings.REDIS_URL = redis_url
    settings.BULLPEN_FLEET_MAX_AGE_S = 0  # every fleet read sees the last beat
    reads.reset()
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                "hosts": [channel_layer_host(redis_url)],
                "prefix": "test:asgi",
                "capacity": 1000,
            },
        }
    }
    yield redis_url


async def existing_queue(name: str, redis_url: str) -> AsyncQueue:
    """A queue that exists before its first job (its meta key holds what the
    first job would write there): sockets follow only queues that exist."""
    queue = AsyncQueue(name, redis_url)
    await queue.client.hset(queue.keys.meta, "opts.maxLenEvents", 10_000)
    return queue


def logged_in(user: User) -> tuple[Client, tuple[bytes, bytes]]:
    """A test client logged in as `user` and the Cookie header of its session."""
    client = Client()
    client.force_login(user)
    sessionid = client.cookies["sessionid"].value
    return client, (b"cookie", f"sessionid={sessionid}".encode())


def session_cookie(user: User) -> tuple[bytes, bytes]:
    """A Cookie header carrying a logged-in session of this user."""
    return logged_in(user)[1]


@pytest.fixture
def viewer() -> User:
    """A user holding only the view permission."""
    user = User.objects.create_user("viewer", password="x")
    user.user_permissions.add(Permission.objects.get(codename="view_queues"))
    return user


_open: list[WebsocketCommunicator] = []


def run(test: Callable[[], Awaitable[None]]) -> None:
    """Run one async test body, then close its sockets, the reader and the
    layer's pools (whatever the outcome)."""

    async def body() -> None:
        try:
            await asyncio.wait_for(test(), 20)
        finally:
            await close_all(_open)
            _open.clear()
            _pending.clear()
            await reset_reader()
            await reset_hub()
            layer = get_channel_layer()
            if hasattr(layer, "close_pools"):  # in memory (a cluster) has none
                await layer.close_pools()

    asyncio.run(body())


async def close_all(comms: list[WebsocketCommunicator]) -> None:
    """Disconnect sockets side by side (each may take up to its timeout)."""

    async def close(comm: WebsocketCommunicator) -> None:
        try:
            await comm.disconnect()
        except (Exception, asyncio.CancelledError):  # already closed
            pass

    await asyncio.gather(*(close(c) for c in comms))


async def open_socket(*headers: tuple[bytes, bytes]) -> WebsocketCommunicator:
    """A communicator on the real ASGI application (closed by run())."""
    from dashboard.asgi import application

    comm = WebsocketCommunicator(application, "/ws/live/", headers=list(headers))
    _open.append(comm)
    return comm


async def subscribed(
    cookie: tuple[bytes, bytes], **subscription: Any
) -> WebsocketCommunicator:
    """A connected socket of a logged-in user that sent one subscribe."""
    comm = await open_socket(ORIGIN, cookie)
    assert (await comm.connect())[0]
    await comm.send_json_to({"type": "subscribe", **subscription})
    return comm


async def following(
    *queue_keys: str, sockets: int = 1, gpus: bool = False, timeout: float = 10.0
) -> None:
    """Until this process's events reader follows each queue for at least
    `sockets` sockets (and, with `gpus`, reads the workers stream from a
    known id): a subscribe has taken effect, so events made after this reach
    the socket. A fixed sleep instead raced a busy machine, whose reader had
    not yet taken the stream's position when the test's event was added."""
    reader = get_reader()

    def ready() -> bool:
        queues = all(
            key in reader.followed and reader.followed[key].refs >= sockets
            for key in queue_keys
        )
        return queues and (not gpus or reader.workers_last_id != "$")

    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, f"not following {queue_keys} {gpus=}"
        await asyncio.sleep(0.01)


_pending: dict[int, list[dict[str, Any]]] = {}


async def next_message(
    comm: WebsocketCommunicator, timeout: float = 5.0
) -> dict[str, Any]:
    """The next message, unpacking `batch` frames (several messages at once)."""
    waiting = _pending.setdefault(id(comm), [])
    if not waiting:
        frame = await comm.receive_json_from(timeout=timeout)
        waiting.extend(frame["messages"] if frame["type"] == "batch" else [frame])
    return waiting.pop(0)


async def receive_until(
    comm: WebsocketCommunicator, match: Callable[[dict[str, Any]], bool], timeout=5.0
) -> dict[str, Any]:
    """The first message that matches (others are skipped)."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        assert left > 0, "no matching message in time"
        message = await next_message(comm, timeout=left)
        if match(message):
            return message


async def drain(
    comm: WebsocketCommunicator,
    seconds: float,
    until: Callable[[dict[str, Any]], bool] | None = None,
) -> list[dict[str, Any]]:
    """Every message arriving within `seconds` (or up to the first one
    `until` accepts), with its arrival time (polling: a receive that times
    out would cancel the application)."""
    out = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _pending.get(id(comm)) and await comm.receive_nothing(
            timeout=0.002, interval=0.001
        ):
            continue
        message = await next_message(comm)
        message["_at"] = time.monotonic()
        out.append(message)
        if until is not None and until(message):
            break
    return out


# --- who may connect -----------------------------------------------------------------
