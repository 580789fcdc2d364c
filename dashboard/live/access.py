"""Who may keep a live socket open, checked again after it connected.

A socket is accepted for a logged-in session whose user may view queues; it
stays open only while that is still so:

- logging out (Django's `user_logged_out` signal, connected in apps.py) sends
  `{"type": "session.ended"}` to the session's group on the channel layer, so
  the session's sockets in every dashboard process close at once;
- every subscribe, and every `ACCESS_RECHECK_S` seconds, a socket reads its
  session and user again (`check`): a session that ended or expired, a user
  made inactive or a removed view permission closes it.

The group's name is a digest of the session key, never the key itself (the
channel layer keeps group names in Redis).
"""

from __future__ import annotations

import hashlib
import logging
from importlib import import_module
from types import SimpleNamespace
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib import auth
from django.contrib.auth.signals import user_logged_out
from django.dispatch import receiver

from dashboard.models import VIEW

log = logging.getLogger(__name__)

#: Close codes (4000-4999 are the application's): no session, no permission.
CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
#: The channel-layer message type that ends a session's sockets.
SESSION_ENDED = "session.ended"


def session_group(session_key: str) -> str:
    """The channel-layer group of one session's sockets: `s.<sha1 of the key>`."""
    return "s." + hashlib.sha1(session_key.encode()).hexdigest()


def check(session_key: str | None, user_pk: Any) -> int | None:
    """None while the session is still this user's, logged in, and the user
    may view queues; otherwise the close code that says why not (reads the
    session and the user afresh: nothing cached on the socket counts)."""
    if not session_key:
        return CLOSE_UNAUTHENTICATED
    store = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    # Django's own check (backend, session hash, is_active); it reads only
    # `request.session`.
    user = auth.get_user(SimpleNamespace(session=store))  # type: ignore[arg-type]
    if not user.is_authenticated or user.pk != user_pk:
        return CLOSE_UNAUTHENTICATED
    if not user.has_perm(VIEW):
        return CLOSE_FORBIDDEN
    return None


@receiver(user_logged_out, dispatch_uid="bullpen-live-end-session")
def end_session_sockets(sender: Any, request: Any, **kwargs: Any) -> None:
    """Close the sockets of a session that logs out (in every process)."""
    key = getattr(getattr(request, "session", None), "session_key", None)
    if not key:
        return
    group = session_group(key)
    try:
        async_to_sync(get_channel_layer().group_send)(  # type: ignore[union-attr]
            group, {"type": SESSION_ENDED, "group": group}
        )
    except Exception as exc:  # noqa: BLE001 - logging out must not fail
        # The sockets still close at their next access check.
        log.warning("live: could not end the sockets of a session: %r", exc)
