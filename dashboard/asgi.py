"""ASGI entry point, served by daphne: HTTP to Django, websockets to channels.

Websockets pass the Origin check (the Origin's host must be in ALLOWED_HOSTS)
and the session middleware (scope["user"]) before reaching a consumer; the
consumer refuses a socket without a logged-in user. Static files are served
by WhiteNoise's middleware inside Django (dashboard/staticfiles.py), so that
nothing is needed in front of daphne.
"""

from __future__ import annotations

import gc
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
# Django is set up before anything imports models (consumers do).
django_application = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from dashboard.routing import prepare, websocket_urls  # noqa: E402

# daphne would read a whole API request body before the API could refuse it;
# the first discovery SCAN (seconds over a million keys), the charts' sampler
# and the batch runner start now, in the background.
prepare()

application = ProtocolTypeRouter(
    {
        "http": django_application,
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urls("")))
        ),
    }
)


# Everything imported so far lives as long as the process: keep the cyclic GC
# from walking it again on every full collection (a pause of tens of ms on
# each of them; request latency shows it at p95).
gc.freeze()
