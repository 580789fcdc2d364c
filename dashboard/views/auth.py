"""Login and logout pages (Django's auth views with our templates), with
failed logins throttled per username and client address.

The failure count lives in Redis under Bullpen's namespace, so every
dashboard process shares it; a locked-out pair is refused before its password
is checked, with a message saying when to try again, and both the lockout and
each refused attempt are written to the audit log."""

from __future__ import annotations

import hashlib
from typing import Any

from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.http import HttpRequest, HttpResponse
from django.urls import reverse, reverse_lazy

from .. import audit, conf
from ..redis import client

#: The error code of a refused (throttled) login.
THROTTLED = "throttled"


def failures_key(username: str, address: str) -> str:
    """The Redis key counting failed logins of one username from one address
    (hashed: usernames typed by strangers do not land in Redis as typed)."""
    digest = hashlib.sha256(f"{username.lower()}\0{address}".encode()).hexdigest()
    return f"{conf.get().namespace}:login-failures:{digest[:32]}"


def client_address(request: HttpRequest) -> str:
    """The address the connection came from (a proxy's when behind one)."""
    return str(request.META.get("REMOTE_ADDR") or "unknown")


class ThrottledAuthenticationForm(AuthenticationForm):
    """Django's login form, refusing a username and address with too many
    recent failures (BULLPEN_LOGIN_MAX_FAILURES per BULLPEN_LOGIN_LOCKOUT_S)."""

    def clean(self) -> dict[str, Any]:
        """Check the throttle, then the password; count a failure, clear on success."""
        request = self.request
        assert request is not None
        username = str(self.cleaned_data.get("username") or "")
        address = client_address(request)
        key = failures_key(username, address)
        conn = client()
        limit = conf.get().login_max_failures
        if int(conn.get(key) or 0) >= limit:
            wait_s = max(int(conn.ttl(key)), 1)
            audit.record(
                request, f"user:{username}", "login", "denied", f"throttled ({address})"
            )
            raise ValidationError(
                f"Too many failed logins for {username} from your address: "
                f"try again in {-(-wait_s // 60)} minute(s).",
                code=THROTTLED,
            )
        try:
            cleaned = super().clean()
        except ValidationError:
            pipe = conn.pipeline()
            pipe.incr(key)
            pipe.expire(key, conf.get().login_lockout_s)
            failures = int(pipe.execute()[0])
            if failures == limit:
                audit.record(
                    request,
                    f"user:{username}",
                    "login",
                    "error",
                    f"{failures} failed logins from {address}: locked for "
                    f"{conf.get().login_lockout_s} s",
                )
            raise
        conn.delete(key)
        return cleaned


class LoginView(auth_views.LoginView):
    """The login page; a throttled attempt is answered 429."""

    form_class = ThrottledAuthenticationForm
    template_name = "dashboard/login.html"
    redirect_authenticated_user = True

    def get_default_redirect_url(self) -> str:
        """Without a `next`, the dashboard's overview (not a host's
        LOGIN_REDIRECT_URL)."""
        return reverse("bullpen:overview")

    def form_invalid(self, form: AuthenticationForm) -> HttpResponse:
        """The form again, with 429 when the attempt was throttled."""
        response = super().form_invalid(form)
        if form.has_error(NON_FIELD_ERRORS, THROTTLED):
            response.status_code = 429
        return response


login = LoginView.as_view()
logout = auth_views.LogoutView.as_view(next_page=reverse_lazy("bullpen:login"))
