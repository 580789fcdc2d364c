"""Liveness for process managers: a heartbeat file a long-running process
rewrites every few seconds from its main loop, and the check an exec probe
runs (`python -m gpu_workers check-alive`, `manage.py runwebhooks
--check-alive`): fresh enough exits 0, stale or missing exits 1 with one line.

A stopped or hung loop stops rewriting the file, so the check fails after
`max_age_s` even though the process still exists (SIGSTOP, a deadlock)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
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


#: A folder of liveness files nothing rewrote for this long, whose owner is
#: gone, is what a killed supervisor left (its workers beat every 2 s).
STALE_DIR_S = 300.0
#: The file naming a liveness folder's owner (its pid).
OWNER_FILE = "owner"


def liveness_dir(prefix: str = "bullpen-alive-") -> Path:
    """A new folder for a supervisor's children's liveness files, its pid
    in OWNER_FILE, after sweeping what killed supervisors left."""
    sweep_stale_dirs(Path(tempfile.gettempdir()), prefix)
    path = Path(tempfile.mkdtemp(prefix=prefix))
    (path / OWNER_FILE).write_text(f"{os.getpid()}\n")
    return path


def touch_owner(path: Path) -> None:
    """Mark a supervisor's liveness folder as in use (no child may beat)."""
    try:
        os.utime(path / OWNER_FILE)
    except OSError:
        pass


def sweep_stale_dirs(
    parent: Path, prefix: str, stale_s: float = STALE_DIR_S, now: float | None = None
) -> int:
    """Remove the `prefix`* folders under `parent` that nothing touched for
    `stale_s` and whose owner process is gone (or unnamed); returns how
    many. A SIGKILLed supervisor cannot remove its own; a live one's
    children rewrite theirs every few seconds, so it is never swept, even
    from another pid namespace sharing the folder."""
    now = time.time() if now is None else now
    removed = 0
    for path in parent.glob(f"{prefix}*"):
        try:
            if not path.is_dir() or path.is_symlink():
                continue
            touched = max(
                [path.stat().st_mtime] + [p.stat().st_mtime for p in path.iterdir()]
            )
        except OSError:
            continue
        if now - touched < stale_s or _running(read_pid(path / OWNER_FILE, 0)):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed += 1
    return removed


def _running(pid: int | None) -> bool:
    if pid is None or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # someone else's: it exists
        return True
    return True


def read_pid(path: str | os.PathLike[str], field: int = 1) -> int | None:
    """The pid a liveness file names (`<time> <pid>`, as `beat` writes it;
    `field` 0 for an owner file); None when the file is missing or names
    none."""
    try:
        fields = Path(path).read_text().split()
    except (FileNotFoundError, NotADirectoryError, UnicodeDecodeError):
        return None
    try:
        return int(fields[field])
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
