"""What a dashboard server process runs besides its requests, started when
its ASGI application is built, by `dashboard.routing.prepare()`: in the
standalone site's dashboard/asgi.py and in a host's asgi.py (docs/embedding.md),
so a mounted dashboard runs the same as the standalone site.

- the first discovery SCAN, so the first page need not wait for it;
- the charts' sampler thread (reads/charts.py; off with `conf.series_sampling` off);
- the batch runner, which resumes batches a stopped process left running
  (bulk/runner.py).

Each starts once per process, however often this is called."""

from __future__ import annotations

import threading

from dashboard.console.reads import charts
from dashboard.shared import discovery

from .bulk import runner

_started = threading.Event()


def start() -> None:
    """Start the process's background work, once."""
    if _started.is_set():
        return
    _started.set()
    discovery.prewarm_discovery()
    charts.start_sampling()
    runner.ensure_started()
