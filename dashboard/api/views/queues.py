"""Queues: the ones a token may use, and counts per state."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from queues.discovery import discover_queues

from .. import conf, store
from ..handling import Call, json_response
from ..spec import operation
from ..validation import QUEUE_NAME_RE
from .common import queue_of


def _queue_body(name: str) -> dict[str, object]:
    q = queue_of(name)
    return {"queue": name, "paused": bool(q.is_paused()), "counts": q.get_counts()}


@operation(
    method="GET",
    path="/queues",
    operation_id="listQueues",
    summary="The queues this token may read, with counts per state",
    scope="read",
    responses={200: ("Queues", "QueueList")},
    tags=("queues",),
)
def list_queues(request: HttpRequest, call: Call) -> HttpResponse:
    """Named queues of the token, or every discovered queue for `*`."""
    assert call.principal is not None
    token = call.principal.token
    assert token is not None
    names = [n for n in token.queue_list if n != "*"]
    if "*" in token.queue_list:
        found = discover_queues(store.client(), [conf.prefix()])
        names += [name for _, name in found]
    wanted = sorted(
        {n for n in names if QUEUE_NAME_RE.fullmatch(n) and n != conf.webhook_queue()}
    )
    return json_response({"queues": [_queue_body(n) for n in wanted[:500]]})


@operation(
    method="GET",
    path="/queues/{queue}",
    operation_id="getQueue",
    summary="A queue's counts per state and whether it is paused",
    scope="read",
    responses={200: ("The queue", "Queue")},
    tags=("queues",),
)
def get_queue(request: HttpRequest, call: Call, queue: str) -> HttpResponse:
    """Counts of one queue (zeros for a queue that has no jobs yet)."""
    return json_response(_queue_body(queue))
