"""Liveness for process managers: a heartbeat file a long-running process
rewrites every few seconds from its main loop, and the check an exec probe
runs (`python -m gpu_workers check-alive`, `manage.py runwebhooks
--check-alive`): fresh enough exits 0, stale or missing exits 1 with one line.

A stopped or hung loop stops rewriting the file, so the check fails after
`max_age_s` even though the process still exists (SIGSTOP, a deadlock)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

#: How often a process rewrites its liveness file.
LIVENESS_INTERVAL_S = 2.0
#: The check's default: a file older than this is stale.
LIVENESS_MAX_AGE_S = 30.0


class LivenessFile:
    """Rewrites one file with the time now, at most every `interval_s`."""

    def __init__(self, path: str | os.PathLike[str], interval_s: float) -> None:
        self.path = Path(path)
        self.interval_s = interval_s
        self._next = 0.0

    def beat(self, now: float | None = None) -> None:
        """Rewrite the file if due (`now` is time.monotonic())."""
        now = time.monotonic() if now is None else now
        if now < self._next:
            return
        self._next = now + self.interval_s
        # A fresh name then a rename: the check never reads half a file.
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        tmp.write_text(f"{time.time():.3f} {os.getpid()}\n")
        os.replace(tmp, self.path)

    def remove(self) -> None:
        """Remove the file (a clean exit is not alive)."""
        self.path.unlink(missing_ok=True)


def read_pid(path: str | os.PathLike[str]) -> int | None:
    """The pid a liveness file names (`<time> <pid>`, as `beat` writes it);
    None when the file is missing or names none."""
    try:
        fields = Path(path).read_text().split()
    except FileNotFoundError:
        return None
    try:
        return int(fields[1])
    except (IndexError, ValueError):
        return None


def staleness(
    path: str | os.PathLike[str], max_age_s: float, now: float | None = None
) -> str | None:
    """None when `path` was rewritten within `max_age_s`, else why not."""
    now = time.time() if now is None else now
    try:
        age = now - Path(path).stat().st_mtime
    except FileNotFoundError:
        return f"not alive: {path} is missing"
    except OSError as exc:
        return f"not alive: {path} cannot be read ({exc.strerror})"
    if age > max_age_s:
        return f"not alive: {path} is {age:.1f} s old (more than {max_age_s:g} s)"
    return None


def check_alive(path: str | os.PathLike[str] | None, max_age_s: float) -> int:
    """The exec check: 0 when fresh, else 1 with the reason on stderr."""
    if not path:
        print("not alive: no liveness file given", file=sys.stderr)
        return 1
    reason = staleness(path, max_age_s)
    if reason is not None:
        print(reason, file=sys.stderr)
        return 1
    return 0
