"""Helpers shared by every test package."""

from __future__ import annotations

import random
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from gpu_workers.keys import BullpenKeys
from gpu_workers.quota import day_stamp
from queues import Queue
from queues.devredis import free_port, port_taken

T = TypeVar("T")

#: How far a claim's time as tests read it, its `active` event's stream id
#: (Redis's clock, whole ms), may trail the moment the claim script counted
#: it in a limiter, whose window opens then: a ms for rounding, and the time
#: Redis spends in the script between the two (µs, unless a loaded machine
#: preempts Redis there: in the suite on two cores, once, a group's
#: window-opening claim read late enough that its next window's claims fell
#: within `duration` of it).
CLAIM_CLOCK_SLACK_MS = 50


def wait_until(
    predicate: Callable[[], T],
    timeout: float = 10.0,
    interval: float = 0.02,
    what: str = "the condition",
) -> T:
    """Poll until `predicate()` is truthy and return it; AssertionError once
    `timeout` seconds have passed (every wait in the suite is bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


#: What a server says when the port it was given is taken (EADDRINUSE), in
#: any case (Go's servers, Prometheus among them, write it in lower case).
PORT_TAKEN = "Address already in use"
#: Ports a server is given before its start counts as failed.
PORT_TRIES = 5


def quiet_port() -> int:
    """A TCP port free on 127.0.0.1 now, picked from below the kernel's
    ephemeral range, where nothing that binds port 0 (free_port, other
    tests' servers) and no outgoing connection's local port lands: it stays
    free for a server that cannot be started again on another (make run,
    whose port is its operator's)."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768  # Linux's default
    pick = random.SystemRandom()
    for _ in range(100):
        port = pick.randrange(max(1024, low - 12_000), low)
        if port_taken("127.0.0.1", port) is None:
            return port
    return free_port()  # (a range below the ephemeral one that is all taken)


def serve_on_free_port(
    start: Callable[[int], subprocess.Popen[Any]],
    output: Callable[[], str],
    answers: Callable[[int], bool],
    timeout: float = 30,
    pick: Callable[[], int] | None = None,
) -> tuple[subprocess.Popen[Any], int]:
    """Start a server process (`start(port)`) on a port `pick` found free
    and wait until `answers(port)`. The pick closes its socket before the
    server binds, so anything may take the port in between (another test's
    server, an outgoing connection's ephemeral port): a server that exits
    saying so (`output()` holds PORT_TAKEN) is started again on another
    port, up to PORT_TRIES ports. Any other exit fails with its output.
    `pick`: free_port."""
    for attempt in range(PORT_TRIES):
        port = (pick or free_port)()
        proc = start(port)

        def up(proc: subprocess.Popen[Any] = proc, port: int = port) -> str:
            if proc.poll() is not None:
                return "exited"
            return "up" if answers(port) else ""

        try:
            state = wait_until(up, timeout, 0.1, f"a server to answer on port {port}")
        except AssertionError:
            stop_process(proc, 5)  # it never answered: not left running
            raise
        if state == "up":
            return proc, port
        text = output()
        if PORT_TAKEN.lower() not in text.lower() or attempt + 1 == PORT_TRIES:
            raise AssertionError(f"the server exited (port {port}):\n{text[-3000:]}")
    raise AssertionError("unreachable")


def serve_logged(
    argv: Callable[[int], Sequence[str]],
    log: Path,
    listening: Callable[[int], str] | None = None,
    answers: Callable[[int], bool] | None = None,
    timeout: float = 30,
    **popen: Any,
) -> tuple[subprocess.Popen[bytes], int]:
    """`argv(port)` started on a free port (serve_on_free_port), its output
    in `log`: up once its log holds `listening(port)` (it bound the port
    itself: a process that took the port first would answer there too) and
    `answers(port)`. `popen`: more of subprocess.Popen's arguments (cwd,
    env). Returns the process and its port."""

    def start(port: int) -> subprocess.Popen[bytes]:
        with open(log, "wb") as out:
            return subprocess.Popen(
                list(argv(port)),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                **popen,
            )

    def log_text() -> str:
        return log.read_text(errors="replace")

    def up(port: int) -> bool:
        if listening is not None and listening(port) not in log_text():
            return False
        return answers is None or answers(port)

    return serve_on_free_port(start, log_text, up, timeout)


@contextmanager
def first_pick_taken(monkeypatch: Any) -> Iterator[list[int]]:
    """While inside, a socket listens on a port and serve_on_free_port's
    first pick is that port (the race it re-picks for, made certain). Yields
    the picks not yet taken: [the held port] until a server start took it."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(8)
        picks, pick = [held.getsockname()[1]], free_port
        monkeypatch.setattr(
            sys.modules[__name__],
            "free_port",
            lambda: picks.pop(0) if picks else pick(),
        )
        yield picks


def stop_process(proc: subprocess.Popen[Any], timeout_s: float) -> None:
    """SIGTERM `proc` and wait up to `timeout_s` for it; SIGKILL after."""
    proc.terminate()
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def round_trips(conn: Any, monkeypatch: Any) -> list[str]:
    """Each connection taken from the redis-py client `conn`'s pool from now
    on: one per command or pipeline sent, so one per round trip."""
    taken: list[str] = []
    pool = conn.connection_pool
    real = pool.get_connection

    def counting(*args: Any, **kwargs: Any) -> Any:
        taken.append(str(args[:1]))
        return real(*args, **kwargs)

    monkeypatch.setattr(pool, "get_connection", counting)
    return taken


def use_gpu_seconds(r: Any, q: Queue, group: str, seconds: float) -> None:
    """Count `seconds` of GPU for `group` today, where a GPU worker's attempts
    add them (the day's usage hash of gpu_workers/quota.py)."""
    usage = BullpenKeys().group_usage(q.keys.qualified_name, day_stamp(time.time()))
    r.hincrbyfloat(usage, group, seconds)
