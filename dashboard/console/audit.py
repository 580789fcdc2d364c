"""Writing the audit log: every operator action, whatever its outcome."""

from __future__ import annotations

from django.http import HttpRequest

from .models import AuditEntry

#: Longest detail text stored (errors from Redis can be long).
DETAIL_CHARS = 2_000


def record(
    request: HttpRequest | None,
    target: str,
    action: str,
    outcome: str,
    detail: str = "",
) -> AuditEntry:
    """Store one entry for the request's user (none: no request, as for an
    `authenticate()` call without one, or an anonymous user)."""
    found = getattr(request, "user", None)
    user = found if found is not None and found.is_authenticated else None
    return AuditEntry.objects.create(
        user=user,
        username=user.get_username() if user else "",
        target=target[:400],
        action=action[:64],
        outcome=outcome,
        detail=detail[:DETAIL_CHARS],
    )


def record_as(actor: str, target: str, action: str, outcome: str, detail: str) -> None:
    """Store one entry for a caller that is not a user (an API token: the
    shared audit hook, dashboard/shared/audit.py)."""
    AuditEntry.objects.create(
        user=None,
        username=actor[:150],
        target=target[:400],
        action=action[:64],
        outcome=outcome,
        detail=detail[:DETAIL_CHARS],
    )
