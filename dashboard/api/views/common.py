"""Helpers the operation views share."""

from __future__ import annotations

from functools import lru_cache

import redis
from django.http import HttpRequest
from django.urls import reverse

from queues import Queue

from .. import conf, store


@lru_cache(maxsize=1024)
def _queue(client: redis.Redis, prefix: str, name: str) -> Queue:
    return Queue(name, client, prefix)


def queue_of(name: str) -> Queue:
    """The API queue of this name (cached per client)."""
    return _queue(store.client(), conf.prefix(), name)


def api_url(request: HttpRequest, path: str) -> str:
    """The absolute URL of an API path such as `/queues/render/jobs/42`."""
    base = reverse("bullpen_api:openapi").removesuffix("/openapi.json")
    return request.build_absolute_uri(base + path)
