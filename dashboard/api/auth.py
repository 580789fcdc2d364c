"""Who is calling: an API token (Authorization: Bearer) or, on the read
operations of one job, a signed ticket (`?ticket=`, for browsers whose
EventSource cannot send headers)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.core import signing
from django.db import DatabaseError
from django.http import HttpRequest
from django.utils import timezone

from queues import Job

from ..shared import conf
from . import tokens
from .exceptions import Forbidden, Unauthorized
from .models import ApiToken

_TICKET_SALT = "bullpen.api.job-ticket"
_TOUCH_EVERY = timedelta(seconds=60)
_BEARER = {"WWW-Authenticate": 'Bearer realm="bullpen"'}


@dataclass(frozen=True)
class Principal:
    """An authenticated caller."""

    token: ApiToken | None = None
    #: (queue, job id) a ticket grants read access to.
    ticket: tuple[str, str] | None = None
    #: The `timestamp` of the one job (of that id) the ticket was made for: a
    #: later job that reuses the id is not the ticket's.
    ticket_job_ts: int | None = None

    @property
    def rate_key(self) -> str:
        """Whose rate limit a request counts against."""
        if self.token is not None:
            return f"t{self.token.pk}"
        assert self.ticket is not None
        return f"ticket:{self.ticket[0]}:{self.ticket[1]}"

    @property
    def rate_per_min(self) -> int:
        """The caller's requests per minute."""
        if self.token is not None and self.token.rate_limit_per_min:
            return int(self.token.rate_limit_per_min)
        return conf.get().rate_limit_per_min

    def require_scope(self, scope: str) -> None:
        """Forbidden unless the caller has the scope (tickets: none but theirs)."""
        if self.token is None:
            raise Forbidden("insufficient_scope", "a ticket only reads its own job")
        allowed = {
            "read": self.token.can_read,
            "write": self.token.can_write,
            "admin": self.token.can_admin,
        }[scope]
        if not allowed:
            raise Forbidden("insufficient_scope", f"this token has no {scope} scope")

    def owns(self, job: Job | None) -> bool:
        """Whether the caller may see this job as the one its ticket names (a
        token: always; a ticket: only the job instance it was made for)."""
        if self.ticket is None:
            return True
        return job is not None and job.timestamp == self.ticket_job_ts

    def require(self, scope: str, queue: str, job_id: str | None = None) -> None:
        """Forbidden unless the caller may do `scope` on this queue (and job)."""
        if self.ticket is not None:
            if scope != "read" or self.ticket != (queue, job_id):
                raise Forbidden(
                    "insufficient_scope", "a ticket only reads the job it was made for"
                )
            return
        assert self.token is not None
        if not self.token.allows_queue(queue):
            raise Forbidden(
                "queue_not_allowed", f"this token may not use queue {queue}"
            )
        self.require_scope(scope)


def make_ticket(queue: str, job_id: str, job_ts: int | None) -> str:
    """A signed, expiring, read-only grant on one job: the job of this id
    whose `timestamp` is `job_ts` (None: a job that is gone, so none)."""
    return signing.dumps([queue, job_id, job_ts], salt=_TICKET_SALT, compress=False)


def _from_ticket(value: str) -> Principal:
    try:
        queue, job_id, job_ts = signing.loads(
            value, salt=_TICKET_SALT, max_age=conf.get().ticket_max_age_s
        )
        if job_ts is not None and not isinstance(job_ts, int):
            raise TypeError(job_ts)
    except (signing.BadSignature, ValueError, TypeError):
        raise Unauthorized(
            "invalid_ticket", "the ticket is invalid or expired", headers=_BEARER
        ) from None
    return Principal(ticket=(str(queue), str(job_id)), ticket_job_ts=job_ts)


def _from_header(header: str) -> Principal:
    scheme, _, value = header.partition(" ")
    value = value.strip()
    if scheme.lower() != "bearer" or not tokens.looks_like_token(value):
        raise Unauthorized(
            "invalid_token", "send `Authorization: Bearer <token>`", headers=_BEARER
        )
    token = ApiToken.objects.filter(key_hash=tokens.hash_token(value)).first()
    if token is None:
        raise Unauthorized("invalid_token", "unknown API token", headers=_BEARER)
    if not token.is_active:
        raise Unauthorized(
            "revoked_token", "this API token was revoked", headers=_BEARER
        )
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > _TOUCH_EVERY:
        try:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        except DatabaseError:  # best effort: a busy database must not refuse calls
            pass
    return Principal(token=token)


def authenticate(request: HttpRequest, tickets: bool) -> Principal:
    """The caller, or Unauthorized."""
    header = request.META.get("HTTP_AUTHORIZATION")
    if header:
        return _from_header(header)
    ticket: Any = request.GET.get("ticket")
    if tickets and ticket:
        return _from_ticket(str(ticket))
    raise Unauthorized(
        "missing_token", "this operation needs an API token", headers=_BEARER
    )
