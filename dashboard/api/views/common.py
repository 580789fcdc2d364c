"""Helpers the operation views share."""

from __future__ import annotations

from django.http import HttpRequest
from django.urls import reverse

from dashboard.shared.redis import queue_on
from queues import Queue

from ...shared import conf
from .. import store


def queue_of(name: str) -> Queue:
    """The API queue of this name (cached per client)."""
    return queue_on(store.client(), conf.get().prefix, name)


def api_url(request: HttpRequest, path: str) -> str:
    """The absolute URL of an API path such as `/queues/render/jobs/42`."""
    base = reverse("bullpen_api:openapi").removesuffix("/openapi.json")
    return request.build_absolute_uri(base + path)
