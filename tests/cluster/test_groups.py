"""The groups suite (tests/queues/groups) on a 3-primary Redis Cluster: every
group key derives from the queue's hash-tagged prefix, so each script's keys
stay in the queue's slot."""

from tests.queues.groups.test_forgetting import *  # noqa: F403
from tests.queues.groups.test_limits import *  # noqa: F403
from tests.queues.groups.test_retag import *  # noqa: F403
from tests.queues.groups.test_search import *  # noqa: F403
from tests.queues.groups.test_turns import *  # noqa: F403
from tests.queues.groups.test_wire import *  # noqa: F403
