"""The dashboard's page and /metrics tests (tests/dashboard), re-run on a
3-primary Redis Cluster: each test's queue has a hash tag (`qname`), so its
keys sit in one slot and different tests' queues on different primaries."""

from tests.dashboard.conftest import (  # noqa: F401 (fixtures)
    dashboard_redis,
    fast_passwords,
    viewer_client,
)
from tests.dashboard.test_job_page import *  # noqa: F403
from tests.dashboard.test_metrics import *  # noqa: F403
from tests.dashboard.test_overview import *  # noqa: F403
from tests.dashboard.test_queue_page import *  # noqa: F403

# This one counts the commands a page sends in one server's INFO
# commandstats; on a cluster they are spread over the primaries.
del test_a_page_reads_only_its_jobs  # noqa: F405, F821
# This one expects `zzz{q...}` to sort after `{q...}`; '{' sorts after 'z'.
del test_filter_and_sort  # noqa: F405, F821
# The webhook dispatcher's queue (`bullpen-webhooks`, dashboard/api) has no
# hash tag yet, so it cannot be made on a cluster: that is the webhooks' part.
del test_internal_webhook_queue_is_kept_off_user_lists  # noqa: F405, F821
