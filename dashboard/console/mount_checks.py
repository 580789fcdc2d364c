"""System checks of what the dashboard needs from the project it runs in,
the standalone site or a host project that mounts it (docs/embedding.md).

bullpen.E010  a middleware the dashboard needs is not in MIDDLEWARE
bullpen.E011  no DjangoTemplates backend finds app templates with the
              request, auth and messages context processors
bullpen.E012  the root URLconf does not include the operator app's URLs
              (dashboard.console.urls, or dashboard.urls for both apps)
bullpen.E013  AUTHENTICATION_BACKENDS lacks the login throttle's backend, or
              lists Django's ModelBackend before it (the dashboard's login
              would check passwords unthrottled)
bullpen.W001  SECURE_SSL_REDIRECT is on and the dashboard's /healthz or
              /readyz would be redirected (load balancers probe over HTTP)
bullpen.W002  CHANNEL_LAYERS has no default layer: a logout or a permission
              taken away reaches the live sockets of other server processes
              only at their next access check (30 s), not at once
"""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.urls import NoReverseMatch, reverse

#: What the pages and actions rely on, in the order MIDDLEWARE should hold
#: them (Django's own ones as its docs order them).
REQUIRED_MIDDLEWARE = (
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # The policy only on the dashboard's responses (under its prefix).
    "dashboard.console.middleware.ContentSecurityPolicyMiddleware",
    # A dead Redis as the 503 that says so, not a bare 500.
    "dashboard.console.middleware.RedisUnavailableMiddleware",
)

#: The backend every login of the dashboard goes through (the login throttle).
LOGIN_BACKEND = "dashboard.console.login_throttle.ThrottledModelBackend"
_MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"

#: What the templates use: `request` (the current page), `user`, `messages`.
REQUIRED_CONTEXT_PROCESSORS = (
    "django.template.context_processors.request",
    "django.contrib.auth.context_processors.auth",
    "django.contrib.messages.context_processors.messages",
)


@register()
def check_middleware(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Every middleware of REQUIRED_MIDDLEWARE is installed."""
    installed = list(getattr(settings, "MIDDLEWARE", None) or [])
    return [
        Error(
            f"MIDDLEWARE lacks {name!r}, which the Bullpen dashboard needs",
            hint=f"Add {name!r} to MIDDLEWARE (docs/embedding.md lists where)",
            id="bullpen.E010",
        )
        for name in REQUIRED_MIDDLEWARE
        if name not in installed
    ]


@register()
def check_login_backend(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The login throttle's backend is listed, and no ModelBackend before it."""
    backends = list(getattr(settings, "AUTHENTICATION_BACKENDS", None) or [])
    if (
        LOGIN_BACKEND in backends
        and _MODEL_BACKEND not in backends[: backends.index(LOGIN_BACKEND)]
    ):
        return []
    return [
        Error(
            "AUTHENTICATION_BACKENDS does not put the Bullpen login throttle's "
            "backend before Django's ModelBackend: the dashboard's login would "
            "check passwords without limit",
            hint=f"List {LOGIN_BACKEND!r} in AUTHENTICATION_BACKENDS in place of "
            f"{_MODEL_BACKEND!r} (it is ModelBackend, throttled; "
            "docs/embedding.md)",
            id="bullpen.E013",
        )
    ]


@register(Tags.templates)
def check_templates(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Some DjangoTemplates backend loads app templates with the context
    processors of REQUIRED_CONTEXT_PROCESSORS."""
    for engine in getattr(settings, "TEMPLATES", []):
        if engine.get("BACKEND") != "django.template.backends.django.DjangoTemplates":
            continue
        options = engine.get("OPTIONS", {})
        finds_apps = engine.get("APP_DIRS") or any(
            "app_directories" in str(loader) for loader in options.get("loaders", [])
        )
        processors = options.get("context_processors", [])
        if finds_apps and all(p in processors for p in REQUIRED_CONTEXT_PROCESSORS):
            return []
    listed = ", ".join(repr(p) for p in REQUIRED_CONTEXT_PROCESSORS)
    return [
        Error(
            "No DjangoTemplates backend in TEMPLATES loads app templates with the "
            "context processors the Bullpen dashboard needs",
            hint=f'Set "APP_DIRS": True and add {listed} to its '
            'OPTIONS["context_processors"]',
            id="bullpen.E011",
        )
    ]


@register(Tags.urls)
def check_urls(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The dashboard's routes are reachable, and the probes are not
    redirected to HTTPS."""
    try:
        probes = [reverse("bullpen:healthz"), reverse("bullpen:readyz")]
    except NoReverseMatch:
        return [
            Error(
                "The root URLconf does not include the Bullpen dashboard's URLs",
                hint='Add path("ops/queues/", include("dashboard.urls")) (both '
                'apps; any prefix), or include("dashboard.console.urls") for the '
                "pages alone, to the project's urlpatterns",
                id="bullpen.E012",
            )
        ]
    if not getattr(settings, "SECURE_SSL_REDIRECT", False):
        return []
    exempt = [re.compile(r) for r in getattr(settings, "SECURE_REDIRECT_EXEMPT", [])]
    redirected = [p for p in probes if not any(r.search(p.lstrip("/")) for r in exempt)]
    if not redirected:
        return []
    pattern = "^" + re.escape(probes[0].lstrip("/").removesuffix("healthz"))
    return [
        Warning(
            f"SECURE_SSL_REDIRECT would redirect {', '.join(redirected)} to HTTPS, "
            "where load balancers and Kubernetes probe over plain HTTP",
            hint=f"Add r'{pattern}(healthz|readyz)$' to SECURE_REDIRECT_EXEMPT",
            id="bullpen.W001",
        )
    ]


@register()
def check_channel_layer(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """A channel layer carries the live sockets' control messages between
    server processes."""
    if "default" in (getattr(settings, "CHANNEL_LAYERS", None) or {}):
        return []
    return [
        Warning(
            "CHANNEL_LAYERS has no default layer: the dashboard's live sockets "
            "in other server processes learn of a logout or a permission taken "
            "away only at their next access check (30 s)",
            hint="Add CHANNEL_LAYERS = {'default': {'BACKEND': "
            "'channels_redis.core.RedisChannelLayer', 'CONFIG': {'hosts': "
            "[REDIS_URL]}}} (docs/embedding.md)",
            id="bullpen.W002",
        )
    ]
