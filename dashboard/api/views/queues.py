"""Queues: the ones a token may use, and counts per state."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from queues import ops
from queues.drive import cmd, gather, run_sync
from queues.names import is_safe_queue_name

from ...shared import conf
from .. import store
from ..discovery import api_queues
from ..handling import Call, json_response
from ..operations import operation
from .common import queue_of


def _queue_bodies(names: list[str]) -> list[dict[str, object]]:
    """Each queue's counts per state and whether it is paused, all read in
    one pipelined round trip."""
    keys = [queue_of(n).keys for n in names]
    found = run_sync(
        gather(
            [ops.get_counts(k, ()) for k in keys]
            + [cmd("HEXISTS", k.meta, "paused") for k in keys]
        ),
        store.client(),
    )
    return [
        {"queue": name, "paused": bool(paused), "counts": counts}
        for name, counts, paused in zip(names, found, found[len(names) :])
    ]


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
        # What SCAN finds under the API's prefix, cached (see `discovery`).
        names += [name for _, name in api_queues.get(store.client())]
    internal = conf.get().webhook_queue
    wanted = sorted({n for n in names if is_safe_queue_name(n) and n != internal})
    return json_response({"queues": _queue_bodies(wanted[:500])})


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
    return json_response(_queue_bodies([queue])[0])
