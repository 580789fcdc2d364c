"""The host project's ASGI application: its own ProtocolTypeRouter, with the
dashboard's server set up and its live sockets added by two lines
(docs/embedding.md)."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.hostproject.settings")
django_application = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from dashboard.routing import prepare, websocket_urls  # noqa: E402

prepare()

application = ProtocolTypeRouter(
    {
        # The host serves its static files as it likes; here Django's handler.
        "http": ASGIStaticFilesHandler(django_application),
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter([*websocket_urls("ops/queues/")]))
        ),
    }
)
