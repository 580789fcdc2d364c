"""The dashboard's middleware: Content-Security-Policy on every response, a
Redis failure anywhere in a view as the 503 that says so, and a login the
throttle refused as a 429 on any login page."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import NoReverseMatch, reverse
from django.utils.deprecation import MiddlewareMixin

from queues.outages import recoverable

from .login_throttle import refusal_of
from .shared import conf
from .views.common import redis_unavailable


def dashboard_root() -> str | None:
    """The path the dashboard is mounted at ("/" standalone, "/ops/queues/"
    where a host includes dashboard.urls there); None where the URLconf does
    not include it (bullpen.E012), which must not break the host's pages."""
    try:
        return reverse("bullpen:overview")
    except NoReverseMatch:
        return None


class RedisUnavailableMiddleware(MiddlewareMixin):
    """Turns a Redis connection failure anywhere in a view into that 503
    (instead of a bare 500), so a dead Redis reads as what it is.

    MiddlewareMixin makes it async-capable: a sync-only middleware would put
    every ASGI request through a thread of asgiref's bridge, and daphne's exit
    joins such threads forever when SIGTERM comes with requests in flight."""

    def process_exception(
        self, request: HttpRequest, exception: Exception
    ) -> HttpResponse | None:
        """The 503 for Redis failures; anything else goes on as usual."""
        if recoverable(exception):
            return redis_unavailable(request, exception)
        return None


class ContentSecurityPolicyMiddleware(MiddlewareMixin):
    """Sends BULLPEN_CSP as Content-Security-Policy on every response under
    the dashboard's root that has none (a view may set its own): every
    response of the standalone site, only the dashboard's in a host project
    that mounts it under a prefix (the host's own pages keep their policy)."""

    def process_response(
        self, request: HttpRequest, response: HttpResponse
    ) -> HttpResponse:
        """The header, unless the policy is empty or already set."""
        policy = conf.get().csp
        root = dashboard_root()
        if (
            policy
            and root is not None
            and "Content-Security-Policy" not in response
            and request.path.startswith(root)
        ):
            response["Content-Security-Policy"] = policy
        return response


class LoginThrottleMiddleware(MiddlewareMixin):
    """Answers a login the throttle refused (dashboard/login_throttle.py) with
    429 and its message on login pages that do not say so themselves (Django
    admin's, which would show its usual "enter the correct username and
    password"); the dashboard's own login page answers its 429 itself."""

    def process_response(
        self, request: HttpRequest, response: HttpResponse
    ) -> HttpResponse:
        """The 429 page when a login was refused and the view did not answer 429."""
        refusal = refusal_of(request)
        if refusal is None or response.status_code == 429:
            return response
        refused = render(
            request,
            "dashboard/429.html",
            {"message": refusal.message, "retry": request.path},
            status=429,
        )
        refused["Retry-After"] = str(refusal.wait_s)
        return refused
