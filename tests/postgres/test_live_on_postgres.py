"""Live-update socket tests on PostgreSQL: who may connect, what reaches a
socket, and access taken away. The consumer reads the session and user in a
thread of its own, with a connection of its own, which on PostgreSQL cannot
see what a test wrote in its still open transaction (on SQLite's in-memory
test database these tests pass without committing): here the tests commit
(transaction=True), as a real login does."""

import pytest

from tests.dashboard.conftest import *  # noqa: F403 (its fixtures)
from tests.dashboard.test_live import *  # noqa: F403
from tests.dashboard.test_live_access import *  # noqa: F403

pytestmark = pytest.mark.django_db(transaction=True)
