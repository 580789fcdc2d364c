"""Server-Sent Events of a job on a 3-primary Redis Cluster, under WSGI and
ASGI: the stream's clients are made from the `redis+cluster://` URL. The
API's queue names have no braces, so its prefix carries the hash tag."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from django.test import AsyncClient

from queues import Queue
from tests.api.conftest import ApiClient, api_redis, make_token  # noqa: F401
from tests.api.helpers import WorkerThread
from tests.api.test_sse import events_url, parse, steps

PREFIX = "{bull}"
FOLLOWED = ["state", "active", "progress", "progress", "progress", "progress"]


@pytest.fixture(autouse=True)
def tagged_prefix(settings: Any) -> None:
    settings.BULLPEN_API_PREFIX = PREFIX


@pytest.mark.django_db(transaction=True)
def test_follow_a_job_on_a_cluster_wsgi_and_asgi(
    make_token: Any,  # noqa: F811 - fixture
    api_redis: str,  # noqa: F811 - fixture
) -> None:
    """Followed to completion under WSGI, then again (another job) under ASGI."""
    _, token = make_token()
    queue = Queue("render", api_redis, PREFIX)
    first = queue.add("gen", {})
    response = ApiClient(token).get(events_url("render", first.id))
    assert response.status_code == 200, response.content
    stream = parse(response.streaming_content)
    assert next(stream)["data"]["state"] == "waiting"
    worker = WorkerThread("render", steps, api_redis, prefix=PREFIX)
    try:
        assert [m["event"] for m in stream] == [*FOLLOWED[1:], "completed"]
    finally:
        worker.stop()
    second = queue.add("gen", {})

    started = asyncio.Event()

    async def follow() -> list[dict[str, Any]]:
        got = await AsyncClient().get(
            events_url("render", second.id),
            headers={"Authorization": f"Bearer {token}"},
        )
        assert got.status_code == 200, got.content
        chunks = []
        async for chunk in got.streaming_content:
            chunks.append(chunk)
            if b"event: state" in chunk:  # sent after its stream position is taken
                started.set()
        return list(parse(chunks))

    async def main() -> list[dict[str, Any]]:
        live = asyncio.create_task(follow())
        # Following before the job starts (a fixed 0.3 s raced a busy machine).
        await asyncio.wait_for(started.wait(), 15)
        again = WorkerThread("render", steps, api_redis, prefix=PREFIX)
        try:
            return await asyncio.wait_for(live, 15)
        finally:
            await asyncio.to_thread(again.stop)

    events = asyncio.run(main())
    queue.close()
    assert [m["event"] for m in events] == [*FOLLOWED, "completed"]
