"""The API's operations, one module per resource; importing this package
registers them all (see `operations`)."""

from . import actions, docs, events, groups, jobs, queues  # noqa: F401
