"""The two lines a host project's asgi.py adds for Bullpen (docs/embedding.md),
inside its own ProtocolTypeRouter:

    prepare()
    URLRouter([*host_routes, *websocket_urls("ops/queues/")])

wrapped, as every channels route that needs the user, in
AllowedHostsOriginValidator and AuthMiddlewareStack. The standalone site's
dashboard/asgi.py does the same."""

from __future__ import annotations

import threading
import warnings
from typing import TYPE_CHECKING

from dashboard.api import bodylimit
from dashboard.console import background
from dashboard.console.live import routing

if TYPE_CHECKING:
    from channels.routing import URLRouter, _ExtendedURLPattern

_prepared = threading.Event()


def prepare() -> None:
    """Set this server process up for both apps, once: daphne refuses
    oversized API bodies before reading them (dashboard/api/bodylimit.py),
    and the operator app's background work starts (discovery, the charts'
    sampler, the batch runner: dashboard/console/background.py)."""
    _prepared.set()
    bodylimit.install()
    background.start()


def websocket_urls(prefix: str) -> list[_ExtendedURLPattern | URLRouter]:
    """The operator app's live socket under `prefix` (the prefix of
    `include("dashboard.urls")`). Only routes; a host that has not called
    `prepare()` gets it called here, with a DeprecationWarning, as before
    the split (until 0.3)."""
    if not _prepared.is_set():
        warnings.warn(
            "dashboard.routing.websocket_urls() no longer sets the server up: "
            "call dashboard.routing.prepare() once in your asgi.py "
            "(docs/embedding.md, 'ASGI'); it is called for you until Bullpen 0.3",
            DeprecationWarning,
            stacklevel=2,
        )
        prepare()
    return routing.websocket_urls(prefix)
