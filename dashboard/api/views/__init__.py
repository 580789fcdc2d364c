"""The API's operations, one module per resource; importing this package
registers them all in `spec.OPERATIONS`."""

from . import docs, events, jobs, queues  # noqa: F401
