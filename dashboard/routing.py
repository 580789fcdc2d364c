"""The dashboard's websocket routes for an ASGI router: the standalone site's
(dashboard/asgi.py) or a host project's, which adds them with one line inside
its own ProtocolTypeRouter (docs/embedding.md):

    URLRouter([*host_routes, *websocket_urls("ops/queues/")])

wrapped, as every channels route that needs the user, in
AllowedHostsOriginValidator and AuthMiddlewareStack."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from channels.routing import URLRouter
from django.urls import path

from dashboard.console import background
from dashboard.api import bodylimit
from dashboard.console.live.routing import websocket_urlpatterns

if TYPE_CHECKING:
    from channels.routing import _ExtendedURLPattern


def websocket_urls(prefix: str) -> list[_ExtendedURLPattern | URLRouter]:
    """The live-updates socket under `prefix`, the same prefix the host gives
    `include("dashboard.urls")` (e.g. "ops/queues/"; "" at the root), so that
    the pages find it at `<prefix>ws/live/`.

    It also makes daphne refuse oversized API bodies before reading them
    (dashboard/api/bodylimit.py), which needs the server's request class, and
    starts the process's background work (dashboard/console/background.py: discovery,
    the charts' sampler, the batch runner): the ASGI module is where a host's
    server is set up."""
    bodylimit.install()
    background.start()
    if not prefix:
        return list(websocket_urlpatterns)
    # django-stubs types path() for Django views only; channels routes ASGI
    # apps with it (see dashboard/console/live/routing.py).
    nested = path(prefix, URLRouter(websocket_urlpatterns))  # type: ignore[arg-type]
    return [cast("_ExtendedURLPattern", nested)]
