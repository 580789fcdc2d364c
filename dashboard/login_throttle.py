"""Failed logins throttled per username and client address, for every login.

`ThrottledModelBackend` stands in for Django's ModelBackend in
AUTHENTICATION_BACKENDS, so the dashboard's /login/, Django admin's login and
any other `authenticate()` call go through it. Before a password is checked
it reserves the attempt in Redis with one script (count and check in one
step: logins sent at once cannot all pass the check before any is counted);
past the configured most failures the attempt is refused unchecked until
the lockout has passed since the last one let through. A success clears the
count. The count lives under Bullpen's namespace, shared by every dashboard
process; the lockout and each refusal are written to the audit log.

A refusal is left on the request (`refusal_of`) for the views to answer 429
with its message: the dashboard's login form itself, any other login view
through `dashboard.middleware.LoginThrottleMiddleware`."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from redis.commands.core import Script

from . import audit
from .addresses import UNKNOWN, client_address
from .shared import conf
from .shared.redis import client

if TYPE_CHECKING:
    from django.contrib.auth.models import _User

#: This backend's dotted path, as AUTHENTICATION_BACKENDS lists it.
BACKEND = "dashboard.login_throttle.ThrottledModelBackend"
_SCRIPT = (Path(__file__).parent / "lua" / "reserve_login_attempt.lua").read_text()
#: The request attribute a refusal is left in.
_REFUSAL = "bullpen_login_refusal"


def failures_key(username: str, address: str) -> str:
    """The Redis key counting failed logins of one username from one address
    (hashed: usernames typed by strangers do not land in Redis as typed)."""
    digest = hashlib.sha256(f"{username.lower()}\0{address}".encode()).hexdigest()
    return f"{conf.get().namespace}:login-failures:{digest[:32]}"


@dataclass(frozen=True)
class Refusal:
    """A login refused unchecked: whose, from where, and for how long."""

    username: str
    address: str
    wait_s: int

    @property
    def message(self) -> str:
        """What the person logging in is told."""
        return (
            f"Too many failed logins for {self.username} from your address: "
            f"try again in {-(-self.wait_s // 60)} minute(s)."
        )


def refusal_of(request: HttpRequest | None) -> Refusal | None:
    """The refusal the backend left on this request, if it refused a login."""
    found = getattr(request, _REFUSAL, None)
    return found if isinstance(found, Refusal) else None


@lru_cache(maxsize=1)
def _script(conn: Any) -> Script:
    """The reserve script registered with the pages' client (cached by
    dashboard.shared.redis), once rather than on every login."""
    script: Script = conn.register_script(_SCRIPT)
    return script


def _reserve(key: str) -> tuple[bool, int, int]:
    """Count one attempt unless the limit is reached: (admitted, count, ttl_s)."""
    settings = conf.get()
    conn = client()
    admitted, counted, ttl_s = _script(conn)(
        keys=[key],
        args=[settings.login_max_failures, settings.login_lockout_s],
        client=conn,
    )
    return bool(admitted), int(counted), int(ttl_s)


class ThrottledModelBackend(ModelBackend):
    """Django's ModelBackend, each password check reserved in the login
    throttle first (conf.login_max_failures per conf.login_lockout_s)."""

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> _User | None:
        """The user, None on a wrong password; PermissionDenied (no other
        backend tried) when the username and address are locked out."""
        if username is None:
            username = kwargs.get(get_user_model().USERNAME_FIELD)
        if username is None or password is None:
            return None
        name = str(username)
        address = UNKNOWN if request is None else client_address(request)
        key = failures_key(name, address)
        admitted, counted, ttl_s = _reserve(key)
        if not admitted:
            refusal = Refusal(name, address, max(ttl_s, 1))
            if request is not None:
                setattr(request, _REFUSAL, refusal)
            detail = f"throttled ({address})"
            audit.record(request, f"user:{name}", "login", "denied", detail)
            raise PermissionDenied(refusal.message)
        user = super().authenticate(request, username, password, **kwargs)
        if user is not None:
            client().delete(key)
        elif counted == conf.get().login_max_failures:
            audit.record(
                request,
                f"user:{name}",
                "login",
                "error",
                f"{counted} failed logins from {address}: locked for "
                f"{conf.get().login_lockout_s} s",
            )
        return user

    async def aauthenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> _User | None:
        """authenticate() (ModelBackend's own async one would skip the throttle)."""
        check = sync_to_async(self.authenticate)
        return await check(request, username, password, **kwargs)
