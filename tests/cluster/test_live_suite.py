"""The live-socket suite (tests/dashboard/test_live.py, test_live_access.py)
on a 3-primary Redis Cluster, with the channel layer settings make for a
cluster URL (in memory: channels-redis cannot use a cluster)."""

from collections.abc import Iterator
from typing import Any

import pytest

from dashboard.channel_layers import channel_layers
from tests.dashboard.live_helpers import viewer  # noqa: F401 (a fixture)
from tests.dashboard.test_live import *  # noqa: F403
from tests.dashboard.test_live_access import *  # noqa: F403


@pytest.fixture
def live(settings: Any, redis_url: str) -> Iterator[str]:
    """Django's Redis and channel layer as settings make them for the cluster."""
    settings.REDIS_URL = redis_url
    settings.CHANNEL_LAYERS = channel_layers(redis_url, "test:asgi")
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    yield redis_url
