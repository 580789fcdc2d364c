"""Server-Sent Events of one job (see `sse.py`)."""

from __future__ import annotations

from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, StreamingHttpResponse

from queues import AsyncQueue, JobState

from ...shared import conf
from .. import schemas, sse, store
from ..exceptions import NotFound
from ..handling import Call
from ..operations import Param, operation
from ..validation import check_stream_id
from .common import queue_of


@operation(
    method="GET",
    path="/queues/{queue}/jobs/{job_id}/events",
    operation_id="followJob",
    summary="Follow one job's events (Server-Sent Events, resumable)",
    description="A `state` event first (the job now), then every event of the "
    "job (`active`, `progress`, `completed`, `failed`, `delayed`, `waiting`, "
    "...) with its stream id as SSE id, until its final event. Reconnect with "
    "the `Last-Event-ID` header (EventSource does this itself) to get exactly "
    "what followed.",
    scope="read",
    tickets=True,
    event_stream=True,
    params=(
        Param(
            "Last-Event-ID",
            "header",
            {"type": "string", "pattern": schemas.STREAM_ID_PATTERN},
            "Resume after this event id.",
        ),
    ),
    responses={200: ("The event stream", None), 404: ("No such job", None)},
)
def follow_job(
    request: HttpRequest, call: Call, queue: str, job_id: str
) -> StreamingHttpResponse:
    """Stream the job's events; async under ASGI, blocking under WSGI."""
    last_event_id = request.headers.get("Last-Event-ID")
    if last_event_id is not None:
        check_stream_id(last_event_id)
    q = queue_of(queue)
    assert call.principal is not None
    if call.principal.ticket is not None:
        # A ticket follows only the job it was made for, never a later one
        # that reuses its id (a gone job may still be resumed: its events).
        job = q.get_job(job_id, max_value_bytes=64)
        if job is not None and not call.principal.owns(job):
            raise NotFound("job_not_found", f"queue {queue} has no job {job_id}")
    if last_event_id is None and q.get_job_state(job_id) is JobState.UNKNOWN:
        raise NotFound("job_not_found", f"queue {queue} has no job {job_id}")
    c = conf.get()
    steps = sse.job_events(job_id, last_event_id, c.sse_max_s, c.sse_keepalive_s)
    if isinstance(request, ASGIRequest):
        aq = AsyncQueue(queue, store.new_async_client(), c.prefix)
        response = StreamingHttpResponse(
            sse.serve_async(aq, steps), content_type="text/event-stream"
        )
    else:
        response = StreamingHttpResponse(
            sse.serve_sync(q, steps), content_type="text/event-stream"
        )
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response
