"""The core's transition tests (tests/queues/transitions), a representative
set, on a 3-primary Redis Cluster: each queue's scripts run on the primary
that owns its slot."""

from tests.queues.transitions.test_add_delayed_job import *  # noqa: F403
from tests.queues.transitions.test_add_parent_job import *  # noqa: F403
from tests.queues.transitions.test_add_prioritized_job import *  # noqa: F403
from tests.queues.transitions.test_add_standard_job import *  # noqa: F403
from tests.queues.transitions.test_change_priority import *  # noqa: F403
from tests.queues.transitions.test_clean_jobs_in_set import *  # noqa: F403
from tests.queues.transitions.test_deduplication import *  # noqa: F403
from tests.queues.transitions.test_drain import *  # noqa: F403
from tests.queues.transitions.test_extend_locks import *  # noqa: F403
from tests.queues.transitions.test_get_counts import *  # noqa: F403
from tests.queues.transitions.test_move_stalled_jobs_to_wait import *  # noqa: F403
from tests.queues.transitions.test_move_to_active import *  # noqa: F403
from tests.queues.transitions.test_move_to_delayed import *  # noqa: F403
from tests.queues.transitions.test_move_to_finished import *  # noqa: F403
from tests.queues.transitions.test_move_to_wait import *  # noqa: F403
from tests.queues.transitions.test_obliterate import *  # noqa: F403
from tests.queues.transitions.test_pause import *  # noqa: F403
from tests.queues.transitions.test_promote import *  # noqa: F403
from tests.queues.transitions.test_remove_job import *  # noqa: F403
from tests.queues.transitions.test_retry_job import *  # noqa: F403
from tests.queues.transitions.test_update_progress import *  # noqa: F403
