"""The Node BullMQ interop scenarios (tests/interop), a representative set, on
a 3-primary Redis Cluster: Node BullMQ 6.7.0 on an ioredis `Cluster` with the
same `bull` prefix (node/connection.mjs) and Bullpen on a redis+cluster:// URL
produce, work, listen and make flows for each other (both directions) and
share a queue; the 6.7.0 retry and remove parity scenarios (flows across two
queues among them) leave the same state on the cluster when run by Node and
by Bullpen.

`qname` has a hash tag here (`{q…}`), so a test's queues, such as a flow's
`{q…}a` and `{q…}b` or the twin `{q…}-node`, share one slot, as a BullMQ
flow across queues needs on a cluster.

Left out for time (each passes on the cluster too when imported here):
test_crashes, test_schedulers, test_parity_claims, test_parity_scripts,
test_bad_input, test_default_job_options; and test_metrics' series tests,
which wait for room in the current minute. Its worker listing test runs
here: Node's getWorkers() and Bullpen's get_workers() agree on a cluster
(CLIENT LIST of every primary)."""

import shutil

import pytest

from tests.interop.conftest import (  # noqa: F401 (autouse fixtures)
    NODE_MISSING,
    no_stray_processes,
    node_modules,
)
from tests.interop.test_events import *  # noqa: F403
from tests.interop.test_flows import *  # noqa: F403
from tests.interop.test_metrics import (  # noqa: F401
    test_get_workers_agrees_with_node,
)
from tests.interop.test_mixed_workers import *  # noqa: F403
from tests.interop.test_node_to_python import *  # noqa: F403
from tests.interop.test_parity_remove import *  # noqa: F403
from tests.interop.test_parity_retry import *  # noqa: F403
from tests.interop.test_python_to_node import *  # noqa: F403

pytestmark = pytest.mark.skipif(not shutil.which("node"), reason=NODE_MISSING)
