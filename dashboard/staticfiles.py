"""The static files' storage: WhiteNoise's hashed, compressed files once
`collectstatic` has written them (and their manifest) to STATIC_ROOT; the
plain names before that, or where there is no STATIC_ROOT (a checkout, the
tests), which WhiteNoise serves from the app's own directory
(WHITENOISE_USE_FINDERS).

A page then never fails for want of a collect step, and after one it refers
to names that change with the content (`dashboard.0c1d2e3f4a5b.css`), served
with a year-long, immutable Cache-Control.

WhiteNoise's own middleware is sync-only, which would send every ASGI
request through asgiref's thread bridge (see dashboard/console/middleware.py): this
one answers static files on the event loop and passes the rest on.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, cast

from django.http import HttpRequest, HttpResponseBase
from django.utils.deprecation import MiddlewareMixin
from whitenoise.middleware import WhiteNoiseMiddleware
from whitenoise.storage import CompressedManifestStaticFilesStorage


class StaticFilesStorage(CompressedManifestStaticFilesStorage):  # type: ignore[misc]
    """Hashed names from the manifest when `collectstatic` wrote one, else
    the plain names."""

    def read_manifest(self) -> str | None:
        """The manifest's text; None without STATIC_ROOT or before a collect."""
        if not self.location:
            return None
        manifest: str | None = super().read_manifest()
        return manifest

    def stored_name(self, name: str) -> str:
        """The hashed name of `name`, or `name` itself while nothing is collected."""
        if not self.hashed_files:
            return name
        stored: str = super().stored_name(name)
        return stored


class StaticFilesMiddleware(MiddlewareMixin):
    """WhiteNoise's middleware, async-capable: the files it knows (STATIC_ROOT,
    and the apps' own through the finders) are answered before any other
    middleware but SecurityMiddleware."""

    def __init__(self, get_response: Any) -> None:
        super().__init__(get_response)
        #: Builds WhiteNoise's table of files (url -> file, headers) once.
        self.whitenoise: Any = WhiteNoiseMiddleware(get_response)

    def process_request(self, request: HttpRequest) -> HttpResponseBase | None:
        """The static file at this path, else None (the request goes on)."""
        wn = self.whitenoise
        path = request.path_info
        found = wn.find_file(path) if wn.autorefresh else wn.files.get(path)
        if found is None:
            return None
        response: HttpResponseBase = wn.serve(found, request)
        return response

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        """As process_request, on the event loop (a file opened, no thread)."""
        response = self.process_request(request)
        if response is None:
            next_ = cast(Awaitable[HttpResponseBase], self.get_response(request))
            response = await next_
        return response
