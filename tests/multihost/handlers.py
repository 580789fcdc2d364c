"""The handler the multi-host test's GPU hosts run (imported by worker
processes): each run of a job appends a line to a file every host can read
(namespaces share the file system), since a cut-off host cannot reach Redis."""

from __future__ import annotations

import os
import time
from typing import Any

from gpu_workers.handlers import JobContext, handler

#: The worker process's host name (the supervisor's child_env sets it).
HOST_VAR = "MULTIHOST_HOST"


def record(path: str, *fields: object) -> None:
    """Append one line (one write on an O_APPEND file: lines never mix)."""
    line = " ".join(str(f) for f in fields) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


@handler("multihost.run")
def run(ctx: JobContext) -> dict[str, Any]:
    """Record the start and end of this run; in between, work for `s` seconds
    without touching Redis (a cut-off host runs to its end)."""
    host = os.environ[HOST_VAR]
    runs = str(ctx.data["runs"])
    record(runs, "start", ctx.job.id, host, ctx.job.attempts_started)
    deadline = time.monotonic() + float(ctx.data["s"])
    while time.monotonic() < deadline and not ctx.should_stop():
        time.sleep(0.05)
    record(runs, "end", ctx.job.id, host)
    return {"host": host}
