"""Fixtures of the API tests: Django pointed at the session Redis, tokens,
and an authenticated test client."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.test import Client

from dashboard.api import discovery
from dashboard.api.models import ApiToken
from dashboard.shared import redis as shared_redis


@pytest.fixture(autouse=True)
def api_redis(settings: Any, redis_url: str) -> Iterator[str]:
    """Point Django (the API and the dashboard) at the flushed test Redis, in
    every test here (never at a Redis that happens to run on 6379)."""
    settings.REDIS_URL = redis_url
    shared_redis.reset()
    discovery.reset()
    yield redis_url
    shared_redis.reset()
    discovery.reset()


@pytest.fixture
def make_token(db: None, api_redis: str) -> Callable[..., tuple[ApiToken, str]]:
    """Issue a token: make_token(queues="*", read=True, write=True, rate=None)."""

    def make(
        queues: str = "*",
        read: bool = True,
        write: bool = True,
        rate: int | None = None,
        name: str = "test",
    ) -> tuple[ApiToken, str]:
        return ApiToken.issue(name, queues, read, write, rate)

    return make


class ApiClient(Client):
    """A test client that sends a bearer token and JSON bodies."""

    def __init__(self, token: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.token = token

    def _auth(self, extra: dict[str, Any]) -> dict[str, Any]:
        if self.token and "HTTP_AUTHORIZATION" not in extra:
            extra["HTTP_AUTHORIZATION"] = f"Bearer {self.token}"
        return extra

    def get(self, path: str, *args: Any, **extra: Any) -> Any:  # type: ignore[override]
        return super().get(path, *args, **self._auth(extra))

    def delete(self, path: str, *args: Any, **extra: Any) -> Any:  # type: ignore[override]
        return super().delete(path, *args, **self._auth(extra))

    def post_json(self, path: str, body: Any, **extra: Any) -> Any:
        """POST a JSON body (a dict, or raw bytes/str sent as they are)."""
        import orjson

        data = body if isinstance(body, (bytes, str)) else orjson.dumps(body)
        content_type = extra.pop("content_type", "application/json")
        return super().post(path, data, content_type=content_type, **self._auth(extra))


@pytest.fixture
def api(make_token: Callable[..., tuple[ApiToken, str]]) -> ApiClient:
    """A client with a read/write token on every queue."""
    _, plain = make_token()
    return ApiClient(plain)
