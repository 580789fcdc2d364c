"""Who may keep a live socket open, checked again after it connected.

A socket is accepted for a logged-in session whose user may view queues; it
stays open only while that is still so:

- logging out (Django's `user_logged_out` signal, connected in apps.py) sends
  `{"type": "session.ended"}` to the session's group on the channel layer, so
  the session's sockets in every dashboard process close at once;
- taking a permission or a group away from a user (or from a group of
  theirs), or deactivating them, sends `{"type": "access.changed"}` to the
  user's group: their sockets check again at once;
- every subscribe, and every `ACCESS_RECHECK_S` seconds, a socket reads its
  session and user again (`check`): a session that ended or expired, a user
  made inactive or a removed view permission closes it (this also covers
  changes the signals do not see, such as a raw SQL update).

A session's group name is a digest of the session key, never the key itself
(the channel layer keeps group names in Redis).
"""

from __future__ import annotations

import hashlib
import logging
from importlib import import_module
from types import SimpleNamespace
from typing import Any

from asgiref.sync import async_to_sync
from django.conf import settings
from django.contrib import auth
from django.contrib.auth.models import Group, User
from django.contrib.auth.signals import user_logged_out
from django.db.models.signals import m2m_changed, post_save
from django.dispatch import receiver

from dashboard.console.models import VIEW

from .hub import control_layer

log = logging.getLogger(__name__)

#: Close codes (4000-4999 are the application's): no session, no permission.
CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
#: The channel-layer message types that end a session's sockets, and that
#: make a user's sockets check their access again.
SESSION_ENDED = "session.ended"
ACCESS_CHANGED = "access.changed"


def session_group(session_key: str) -> str:
    """The channel-layer group of one session's sockets: `s.<sha1 of the key>`."""
    return "s." + hashlib.sha1(session_key.encode()).hexdigest()


def user_group(user_pk: Any) -> str:
    """The channel-layer group of one user's sockets: `u.<pk>`."""
    return f"u.{user_pk}"


def _send(group: str, kind: str) -> None:
    """Send a message naming its group, from sync code (signal receivers)."""
    try:
        async_to_sync(control_layer().group_send)(group, {"type": kind, "group": group})
    except Exception as exc:  # noqa: BLE001 - the change itself must not fail
        # The sockets still find out at their next access check.
        log.warning("live: could not tell sockets (%s): %r", kind, exc)


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
    if key:
        _send(session_group(key), SESSION_ENDED)


def _recheck_users(user_pks: Any) -> None:
    for pk in sorted(set(user_pks)):
        _send(user_group(pk), ACCESS_CHANGED)


@receiver(m2m_changed, sender=User.user_permissions.through, dispatch_uid="bp-up")
@receiver(m2m_changed, sender=User.groups.through, dispatch_uid="bp-ug")
def user_lost_access(
    sender: Any, instance: Any, action: str, reverse: bool, pk_set: Any, **kw: Any
) -> None:
    """A user lost a permission or a group (either side of the relation)."""
    if action not in ("post_remove", "post_clear"):
        return
    if not reverse:
        _recheck_users([instance.pk])
    elif pk_set:
        _recheck_users(pk_set)


@receiver(m2m_changed, sender=Group.permissions.through, dispatch_uid="bp-gp")
def group_lost_permission(
    sender: Any, instance: Any, action: str, reverse: bool, pk_set: Any, **kw: Any
) -> None:
    """A group lost a permission: its users check again."""
    if action not in ("post_remove", "post_clear"):
        return
    groups = [instance.pk] if not reverse else list(pk_set or [])
    _recheck_users(User.objects.filter(groups__in=groups).values_list("pk", flat=True))


@receiver(post_save, sender=User, dispatch_uid="bullpen-live-user-saved")
def user_saved(
    sender: Any, instance: User, created: bool, update_fields: Any, **kwargs: Any
) -> None:
    """A deactivated user (or a changed password) ends their sockets."""
    if not created and set(update_fields or ()) != {"last_login"}:
        _recheck_users([instance.pk])
