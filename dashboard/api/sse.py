"""Server-Sent Events of one job, resumable with Last-Event-ID.

The logic is written once, as a generator of steps (like `queues.ops`):
it yields what it needs read (`Read`, `JobNow`, `LastId`) and what to send
(`bytes`), and two drivers run it: a plain iterator for WSGI servers and an
async iterator for ASGI (daphne), so neither holds a thread per client nor
buffers the stream.

Each event's SSE id is its Redis stream id. A new connection first gets a
`state` event (the job as it is now) whose id is the stream's last id, then
every later event of the job; a reconnecting EventSource sends the last id it
saw and gets exactly what followed. The stream ends after the job's final
event (`completed`, `failed` for good, `removed`), or after the maximum
connection time (the client reconnects and resumes).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Generator, Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import redis
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from dashboard.shared.redaction import redact_fields
from queues import AsyncQueue, Job, JobState, Queue
from queues.connection import for_blocking
from queues.events import FINAL_EVENTS, EventName, QueueEvent, StreamId, parse_entry

from . import defaults

log = logging.getLogger("dashboard.api")

FINAL_STATES = frozenset({JobState.COMPLETED, JobState.FAILED, JobState.UNKNOWN})


@dataclass(frozen=True)
class Read:
    """XREAD the queue's events after `after` (blocking up to block_ms; None: not)."""

    after: str
    block_ms: int | None


@dataclass(frozen=True)
class JobNow:
    """Read the job and its state: -> (JobState, Job | None)."""

    job_id: str


@dataclass(frozen=True)
class LastId:
    """The stream's last and first entry ids: -> (last, first) ("0-0" if none)."""


Step = Read | JobNow | LastId | bytes


def frame(event: str, data: Any, event_id: str | None = None) -> bytes:
    """One SSE message."""
    head = f"id: {event_id}\n" if event_id else ""
    return f"{head}event: {event}\ndata: ".encode() + orjson.dumps(data) + b"\n\n"


def _state_data(job_id: str, state: JobState, job: Job | None) -> dict[str, Any]:
    data: dict[str, Any] = {"job_id": job_id, "state": state.value}
    if job is not None:
        data.update(
            progress=job.progress,
            returnvalue=job.returnvalue,
            failed_reason=job.failed_reason,
            attempts_made=job.attempts_made,
        )
    return redact_fields(data)


def _event_data(job_id: str, event: QueueEvent) -> dict[str, Any]:
    """An event's data, from the one parser's event (queues.events): a
    progress's `data` as `progress`, `failedReason` as `failed_reason`, the
    return value as parsed, every other field as the stream holds it (the
    counts the parser made numbers as their text again)."""
    data: dict[str, Any] = {"job_id": job_id}
    for name, value in event.fields.items():
        if name == "data" and event.event == EventName.PROGRESS:
            data["progress"] = value
        elif name == "failedReason":
            data["failed_reason"] = value
        elif name == "returnvalue" or isinstance(value, str):
            data[name] = value
        else:
            data[name] = str(value)
    return redact_fields(data)


def _job_event(job_id: str, event_id: str, fields: dict[str, str]) -> QueueEvent | None:
    """The job's event in one stream entry, parsed; None for another job's
    (told by its `jobId` alone, so other jobs' data is never parsed)."""
    if fields.get("jobId") != job_id:
        return None
    return parse_entry(event_id, fields)


def job_events(
    job_id: str,
    last_event_id: str | None,
    max_s: float = defaults.SSE_MAX_S,
    keepalive_s: float = defaults.SSE_KEEPALIVE_S,
) -> Generator[Step, Any, None]:
    """The steps of one SSE connection."""
    deadline = time.monotonic() + max_s
    yield f"retry: {defaults.SSE_RETRY_MS}\n\n".encode()
    last, first = yield LastId()
    cursor = last_event_id
    if cursor is None or (
        first != "0-0" and StreamId.parse(cursor) < StreamId.parse(first)
    ):
        # New, or resuming from before what the stream still holds: say where
        # the job is now, then follow from the stream's end.
        state, job = yield JobNow(job_id)
        yield frame("state", _state_data(job_id, state, job), last)
        if state in FINAL_STATES:
            return
        cursor = last
    else:
        state, job = yield JobNow(job_id)
        if state in FINAL_STATES:
            # Replay what followed the client's id; the stream may not hold
            # the final event any more, so end with the state either way.
            replayed = 0
            while replayed < defaults.SSE_REPLAY_MAX:
                entries = yield Read(cursor, None)
                if not entries:
                    break
                replayed += len(entries)
                for entry_id, fields in entries:
                    cursor = entry_id
                    found = _job_event(job_id, entry_id, fields)
                    if found is not None:
                        yield frame(found.event, _event_data(job_id, found), found.id)
                        if found.event in FINAL_EVENTS:
                            return
            yield frame("state", _state_data(job_id, state, job), cursor)
            return
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        block_ms = int(min(keepalive_s, remaining) * 1000) or 1
        entries = yield Read(cursor, block_ms)
        if not entries:
            state, job = yield JobNow(job_id)
            if state in FINAL_STATES:  # its final event was trimmed or missed
                yield frame("state", _state_data(job_id, state, job), cursor)
                return
            yield b": keep-alive\n\n"
            continue
        for entry_id, fields in entries:
            cursor = entry_id
            found = _job_event(job_id, entry_id, fields)
            if found is None:
                continue
            yield frame(found.event, _event_data(job_id, found), found.id)
            if found.event in FINAL_EVENTS:
                return


def _stream_bounds(info: dict[str, Any] | None) -> tuple[str, str]:
    if not info:
        return "0-0", "0-0"
    first = info.get("first-entry")
    return info.get("last-generated-id") or "0-0", first[0] if first else "0-0"


def serve_sync(queue: Queue, steps: Generator[Step, Any, None]) -> Iterator[bytes]:
    """Run the steps with blocking redis-py (WSGI)."""
    client: redis.Redis = queue.client
    reader = client  # a sibling when its read timeout is shorter than a block
    events = queue.keys.events
    reply: Any = None
    try:
        while True:
            step = steps.send(reply)
            reply = None
            if isinstance(step, bytes):
                yield step
            elif isinstance(step, Read):
                if step.block_ms is not None:
                    reader = for_blocking(reader, step.block_ms / 1000)
                got: Any = reader.xread(
                    {events: step.after}, count=100, block=step.block_ms
                )
                reply = got[0][1] if got else []
            elif isinstance(step, JobNow):
                job, state = queue.get_job_with_state(step.job_id)
                reply = (state, job)
            else:
                info = client.xinfo_stream(events) if client.exists(events) else None
                reply = _stream_bounds(info)
    except StopIteration:
        return
    except (
        RedisError
    ) as exc:  # the headers are sent: end the stream, the client resumes
        log.warning("SSE stream ended by a Redis error: %s", exc)
    finally:
        if reader is not client:
            reader.close()


async def serve_async(
    queue: AsyncQueue, steps: Generator[Step, Any, None]
) -> AsyncIterator[bytes]:
    """Run the steps with redis.asyncio (ASGI); closes the queue's client."""
    client: aioredis.Redis = queue.client
    reader = client  # a sibling when its read timeout is shorter than a block
    events = queue.keys.events
    reply: Any = None
    try:
        while True:
            step = steps.send(reply)
            reply = None
            if isinstance(step, bytes):
                yield step
            elif isinstance(step, Read):
                if step.block_ms is not None:
                    reader = for_blocking(reader, step.block_ms / 1000)
                got: Any = await reader.xread(
                    {events: step.after}, count=100, block=step.block_ms
                )
                reply = got[0][1] if got else []
            elif isinstance(step, JobNow):
                job, state = await queue.get_job_with_state(step.job_id)
                reply = (state, job)
            else:
                exists = await client.exists(events)
                info = await client.xinfo_stream(events) if exists else None
                reply = _stream_bounds(info)
    except StopIteration:
        return
    except (
        RedisError
    ) as exc:  # the headers are sent: end the stream, the client resumes
        log.warning("SSE stream ended by a Redis error: %s", exc)
    finally:
        if reader is not client:
            await reader.aclose()
        await queue.close()
