"""Collection settings of tests/queues."""

from __future__ import annotations

#: Type-checked by test_typing.py, never run (their mistakes are on purpose).
collect_ignore = ["typing"]
