"""Producer API tests on PostgreSQL: tokens and their scopes, enqueue with
idempotency keys and per-queue schemas, job reads, and the admin and
management commands that issue tokens."""

from tests.api.conftest import *  # noqa: F403 (its fixtures)
from tests.api.test_admin_and_commands import *  # noqa: F403
from tests.api.test_auth import *  # noqa: F403
from tests.api.test_enqueue import *  # noqa: F403
from tests.api.test_jobs import *  # noqa: F403
from tests.api.test_queue_settings import *  # noqa: F403
