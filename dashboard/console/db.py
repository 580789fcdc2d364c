"""Database connections under daphne: an HTTP request's are closed at its end.

Django's ASGI handler runs each HTTP request's synchronous code in a thread
of its own, so a connection kept for `CONN_MAX_AGE` after the request is
never used again: it stays open on the server until garbage-collected (40
requests, eight at a time, left 27 open on PostgreSQL). The live sockets'
database work (channels' `database_sync_to_async`) runs in one long-lived
thread, where a kept connection is reused: with one per call, 200 sockets
opening at once took 3 to 5 s instead of 1 on PostgreSQL, and some timed out.
So connections are kept (`BULLPEN_DB_CONN_MAX_AGE`) and an HTTP request's
are closed when it finishes. The test client and WSGI servers send the
signal from other handlers and are left alone.
"""

from __future__ import annotations

from typing import Any

from django.core.handlers.asgi import ASGIHandler
from django.core.signals import request_finished
from django.db import connections
from django.dispatch import receiver


@receiver(request_finished, dispatch_uid="bullpen-close-after-asgi-request")
def close_after_asgi_request(sender: Any, **kwargs: Any) -> None:
    """Close this thread's connections at the end of an ASGI HTTP request."""
    if isinstance(sender, type) and issubclass(sender, ASGIHandler):
        connections.close_all()
