"""`python -m gpu_workers drain`: drain the supervisor of this host (or pod)
and wait until it is done, for a Kubernetes preStop hook or a deploy script.

The supervisor's liveness file names its pid (gpu_workers/liveness.py). The
command sends that process SIGTERM, which is the supervisor's drain: every
worker stops claiming jobs and finishes its running ones (at most
`drain_timeout_s`, then the kill grace), then the supervisor removes its
records and the file and exits. The command returns once the file is gone or
the process has ended: 0 drained (or nothing was running), 1 still draining
after --timeout, 2 the file does not name a process.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from .liveness import read_pid

#: How often the command looks whether the supervisor is gone.
POLL_INTERVAL_S = 0.05


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def drain(liveness_file: str | None, timeout_s: float) -> int:
    """SIGTERM the supervisor named by `liveness_file` and wait until it is gone."""
    if not liveness_file:
        print("drain: no liveness file given (BULLPEN_LIVENESS_FILE)", file=sys.stderr)
        return 2
    path = Path(liveness_file)
    if not path.exists():
        print(f"drain: {path} is missing: no supervisor is running", file=sys.stderr)
        return 0
    pid = read_pid(path)
    if pid is None or pid <= 0:
        print(f"drain: {path} names no process", file=sys.stderr)
        return 2
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        print(f"drain: supervisor {pid} is not running", file=sys.stderr)
        return 0
    deadline = time.monotonic() + timeout_s
    while path.exists() and _running(pid):
        if time.monotonic() >= deadline:
            print(
                f"drain: supervisor {pid} still draining after {timeout_s:g} s",
                file=sys.stderr,
            )
            return 1
        time.sleep(POLL_INTERVAL_S)
    print(f"drain: supervisor {pid} drained", file=sys.stderr)
    return 0
