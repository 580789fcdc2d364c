"""Server-Sent Events of a job: followed to completion under WSGI and ASGI,
resumed with Last-Event-ID, replayed for finished jobs, bounded in time."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from typing import Any

import orjson
import pytest
from django.test import AsyncClient

from queues import Job, Queue
from tests.api.conftest import ApiClient
from tests.api.helpers import WorkerThread


def parse(chunks: Iterable[bytes]) -> Iterator[dict[str, Any]]:
    """SSE messages from a byte stream (comments and retry lines skipped)."""
    buffer = b""
    for chunk in chunks:
        buffer += chunk
        while b"\n\n" in buffer:
            raw, buffer = buffer.split(b"\n\n", 1)
            message: dict[str, Any] = {}
            for line in raw.decode().splitlines():
                name, _, value = line.partition(": ")
                if name in ("id", "event"):
                    message[name] = value
                elif name == "data":
                    message["data"] = orjson.loads(value)
            if "event" in message:
                yield message


async def steps(job: Job) -> str:
    for pct in (20, 40, 60, 80):
        await job.update_progress(pct)
        await asyncio.sleep(0.01)
    return "done"


def events_url(qname: str, job_id: str) -> str:
    return f"/api/v1/queues/{qname}/jobs/{job_id}/events"


@pytest.mark.django_db
def test_follow_a_job_to_completion_wsgi(
    api: ApiClient, q: Queue, qname: str, api_redis: str
) -> None:
    """First the job's state, then active, each progress and completed, each
    with its stream id; the stream ends after completed."""
    job = q.add("gen", {})
    response = api.get(events_url(qname, job.id))
    assert response.status_code == 200
    assert response["Content-Type"] == "text/event-stream"
    stream = parse(response.streaming_content)
    first = next(stream)
    assert first["event"] == "state" and first["data"]["state"] == "waiting"
    worker = WorkerThread(qname, steps, api_redis)
    try:
        rest = list(stream)
    finally:
        worker.stop()
    names = [m["event"] for m in rest]
    assert names == [
        "active",
        "progress",
        "progress",
        "progress",
        "progress",
        "completed",
    ]
    assert [m["data"]["progress"] for m in rest[1:5]] == [20, 40, 60, 80]
    assert rest[-1]["data"]["returnvalue"] == "done"
    ids = [m["id"] for m in [first, *rest]]
    assert ids == sorted(ids, key=lambda i: tuple(map(int, i.split("-"))))


@pytest.mark.django_db
def test_resume_with_last_event_id(
    api: ApiClient, q: Queue, qname: str, api_redis: str
) -> None:
    """Reconnecting with the id of the second progress event gets exactly the
    events after it; a finished job's stream replays them and ends."""
    job = q.add("gen", {})
    other = q.add("gen", {})
    # Follow the job before it starts (its state first), so that `full` has
    # every event: a worker started first ran past the first progress events
    # on a busy machine before the stream began.
    stream = parse(api.get(events_url(qname, job.id)).streaming_content)
    first = next(stream)
    assert first["event"] == "state" and first["data"]["state"] == "waiting"
    worker = WorkerThread(qname, steps, api_redis)
    try:
        full = [first, *stream]
        list(parse(api.get(events_url(qname, other.id)).streaming_content))
    finally:
        worker.stop()
    assert full[-1]["event"] == "completed"
    progress = [m for m in full if m["event"] == "progress"]
    resumed = list(
        parse(
            api.get(
                events_url(qname, job.id), HTTP_LAST_EVENT_ID=progress[1]["id"]
            ).streaming_content
        )
    )
    after = full[full.index(progress[1]) + 1 :]
    assert [(m["id"], m["event"]) for m in resumed] == [
        (m["id"], m["event"]) for m in after
    ]
    assert {m["data"]["job_id"] for m in resumed} == {job.id}
    done = list(
        parse(
            api.get(
                events_url(qname, job.id), HTTP_LAST_EVENT_ID=full[-1]["id"]
            ).streaming_content
        )
    )
    assert [m["event"] for m in done] == ["state"]
    assert done[0]["data"]["state"] == "completed"
    fresh = list(parse(api.get(events_url(qname, job.id)).streaming_content))
    assert [m["event"] for m in fresh] == ["state"]


@pytest.mark.django_db
def test_stream_ends_at_the_time_limit_and_resumes(
    api: ApiClient, settings: Any, q: Queue, qname: str
) -> None:
    """A connection lasts at most BULLPEN_API_SSE_MAX_S (keep-alive comments
    meanwhile); a resumed one picks up events that happened in between."""
    settings.BULLPEN_API_SSE_MAX_S = 0.4
    settings.BULLPEN_API_SSE_KEEPALIVE_S = 0.1
    job = q.add("gen", {})
    chunks = list(api.get(events_url(qname, job.id)).streaming_content)
    assert b": keep-alive\n\n" in chunks
    last_id = list(parse(chunks))[-1]["id"]
    job.update_progress(33)
    resumed = list(
        parse(
            api.get(
                events_url(qname, job.id), HTTP_LAST_EVENT_ID=last_id
            ).streaming_content
        )
    )
    assert [(m["event"], m["data"].get("progress")) for m in resumed] == [
        ("progress", 33)
    ]


@pytest.mark.django_db
def test_unknown_job_is_404(api: ApiClient, qname: str) -> None:
    """No stream for a job that does not exist."""
    response = api.get(events_url(qname, "missing"))
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "job_not_found"


@pytest.mark.django_db(transaction=True)
def test_follow_and_resume_under_asgi(
    make_token: Any, q: Queue, qname: str, api_redis: str
) -> None:
    """Under ASGI (daphne) the stream is an async iterator on redis.asyncio:
    followed live to completion, then resumed from a mid-stream id; a ticket
    stands in for the token."""
    _, token = make_token()
    job = q.add("gen", {})
    headers = {"Authorization": f"Bearer {token}"}

    following = asyncio.Event()

    async def follow(last_id: str | None = None, **query: str) -> list[dict[str, Any]]:
        sent = {} if query else dict(headers)
        if last_id:
            sent["Last-Event-ID"] = last_id
        response = await AsyncClient().get(
            events_url(qname, job.id), query, headers=sent
        )
        assert response.status_code == 200, response.content
        chunks = []
        async for chunk in response.streaming_content:
            chunks.append(chunk)
            if b"event: state" in chunk:  # sent once its stream position is taken
                following.set()
        return list(parse(chunks))

    async def main() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        live = asyncio.create_task(follow())
        # Following before the job starts (a fixed 0.3 s raced a busy machine).
        await asyncio.wait_for(following.wait(), 15)
        worker = WorkerThread(qname, steps, api_redis)
        try:
            full = await asyncio.wait_for(live, 15)
        finally:
            await asyncio.to_thread(worker.stop)
        from dashboard.api.auth import make_ticket

        resumed = await follow(
            full[2]["id"], ticket=make_ticket(qname, job.id, job.timestamp)
        )
        return full, resumed

    full, resumed = asyncio.run(main())
    assert [m["event"] for m in full] == [
        "state",
        "active",
        "progress",
        "progress",
        "progress",
        "progress",
        "completed",
    ]
    assert [m["id"] for m in resumed] == [m["id"] for m in full[3:]]


@pytest.mark.django_db(transaction=True)
def test_asgi_stream_outlasts_a_quiet_spell(
    make_token: Any, q: Queue, qname: str, api_redis: str, settings: Any
) -> None:
    """A job that waits longer than the client's read timeout (1 s here, in
    the URL, rather than outlasting redis-py's default 5 s): the stream's
    XREAD (blocking up to the keep-alive) must not fail, so the client sees
    the job through to completed on one connection."""
    settings.REDIS_URL = api_redis + "?socket_timeout=1"
    _, token = make_token()
    job = q.add("gen", {})

    async def follow() -> list[dict[str, Any]]:
        response = await AsyncClient().get(
            events_url(qname, job.id), headers={"Authorization": f"Bearer {token}"}
        )
        assert response.status_code == 200, response.content
        return list(parse([chunk async for chunk in response.streaming_content]))

    async def main() -> list[dict[str, Any]]:
        live = asyncio.create_task(follow())
        await asyncio.sleep(2.5)  # quiet, past the 1 s read timeout
        assert not live.done(), "the stream ended during the quiet spell"
        worker = WorkerThread(qname, steps, api_redis)
        try:
            return await asyncio.wait_for(live, 15)
        finally:
            await asyncio.to_thread(worker.stop)

    got = [m["event"] for m in asyncio.run(main())]
    assert got[0] == "state" and got[-1] == "completed"
