"""Fixtures of the dashboard tests: settings pointed at the real test Redis and
users in each of the dashboard's groups."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from dashboard.console import reads
from tests.dashboard.live_helpers import live, viewer  # noqa: F401 - fixtures


@pytest.fixture(autouse=True)
def fast_passwords(settings: Any) -> None:
    """Cheap password hashing: users are made in almost every test."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def dashboard_redis(settings: Any, redis_url: str) -> Iterator[str]:
    """Point the dashboard at the flushed test Redis; rescan queues on every page."""
    settings.REDIS_URL = redis_url
    settings.BULLPEN_DISCOVERY_TTL_S = 0
    settings.BULLPEN_FLEET_MAX_AGE_S = 0
    reads.reset()
    yield redis_url
    reads.reset()


def user_in(group: str | None, username: str | None = None) -> User:
    """A user in one of the groups the data migration made (None: no group)."""
    user = User.objects.create_user(username or f"u-{group}", password="pw")
    if group:
        user.groups.add(Group.objects.get(name=group))
    return user


def client_for(user: User, **kwargs: Any) -> Client:
    """A test client logged in as `user`."""
    client = Client(**kwargs)
    client.force_login(user)
    return client


@pytest.fixture
def viewer_client(db: None) -> Client:
    """Logged in as a member of `viewer`."""
    return client_for(user_in("viewer"))


@pytest.fixture
def operator_client(db: None) -> Client:
    """Logged in as a member of `operator`."""
    return client_for(user_in("operator"))


@pytest.fixture
def scaler_client(db: None) -> Client:
    """Logged in as a member of `scaler`."""
    return client_for(user_in("scaler"))


@pytest.fixture
def nobody_client(db: None) -> Client:
    """Logged in, in no group: no dashboard permission at all."""
    return client_for(user_in(None, "nobody"))
