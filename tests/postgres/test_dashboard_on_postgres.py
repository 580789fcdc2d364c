"""Dashboard tests on PostgreSQL: login and permissions, the audit log,
login throttling, and the overview, queue, job, action and search pages."""

from tests.dashboard.conftest import *  # noqa: F403 (its fixtures)
from tests.dashboard.test_actions import *  # noqa: F403
from tests.dashboard.test_audit_names import *  # noqa: F403
from tests.dashboard.test_auth import *  # noqa: F403
from tests.dashboard.test_job_page import *  # noqa: F403
from tests.dashboard.test_login_throttle import *  # noqa: F403
from tests.dashboard.test_overview import *  # noqa: F403
from tests.dashboard.test_queue_page import *  # noqa: F403
from tests.dashboard.test_search_triage import *  # noqa: F403
