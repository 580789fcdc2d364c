"""A producer, worker processes and Redis faults, for tests/faults and
bench/faults_soak.py.

The workers are real `python -m queues worker` processes; the producer is a
thread that adds jobs with ids of its own and, when an add fails, sends the
same add again (an id that exists already is not added twice) until it is
acknowledged. A fault is a function of the Redis server and an admin client.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import redis

from queues import Queue
from tests.helpers import wait_until
from tests.redis_server import RedisServer

REPO_ROOT = Path(__file__).resolve().parents[2]
PROCESSOR = "tests.faults.processors:work"
#: Short locks and checks, so that what a fault strands comes back in seconds.
LOCK_DURATION_MS = 2000
STALLED_INTERVAL_MS = 1000
#: The workers' longest wait on an empty queue (shorter than the default 5 s,
#: so that a fault outlasting it costs the suite less time).
DRAIN_DELAY_S = 1.0
#: AOF on: a SHUTDOWN then restart keeps every acknowledged add.
AOF_ARGS = ("--appendonly", "yes", "--appendfsync", "everysec")

Fault = Callable[[RedisServer, redis.Redis], None]


def aof_server() -> RedisServer:
    """A started redis-server that persists to an append-only file."""
    return RedisServer(extra_args=AOF_ARGS).start()


class Producer:
    """A thread adding one job every `interval_s`, each retried until acked."""

    def __init__(
        self,
        url: str,
        queue: str,
        interval_s: float = 0.02,
        groups: int = 0,
        ms: int = 10,
    ) -> None:
        self.url = url
        self.queue = queue
        self.interval_s = interval_s
        #: With `groups`, job n goes to group `g{n % groups}` (data `g` names it).
        self.groups = groups
        self.ms = ms
        self.acked: list[str] = []
        self.refusals: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Producer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        # A short read timeout: a stalled server fails an add, which is sent
        # again (same id) when the server answers.
        client = redis.Redis.from_url(self.url, socket_timeout=1.0)
        q = Queue(self.queue, client)
        n = 0
        while not self._stop.is_set():
            job_id = f"p{n}"
            while not self._stop.is_set():
                try:
                    if self.groups:
                        g = f"g{n % self.groups}"
                        data = {"ms": self.ms, "g": g}
                        q.add("work", data, job_id=job_id, group=g)
                    else:
                        q.add("work", {"ms": self.ms}, job_id=job_id)
                except redis.RedisError as exc:
                    kind = type(exc).__name__
                    self.refusals[kind] = self.refusals.get(kind, 0) + 1
                    self._stop.wait(0.05)
                    continue
                self.acked.append(job_id)
                break
            n += 1
            self._stop.wait(self.interval_s)
        q.close()


class Workers:
    """`count` CLI worker processes, each logging to its own file."""

    def __init__(
        self,
        url: str,
        queue: str,
        log_dir: Path,
        count: int = 3,
        processor: str = PROCESSOR,
        concurrency: int = 8,
    ) -> None:
        self.logs = [log_dir / f"worker-{i}.log" for i in range(count)]
        self.argv = (
            [sys.executable, "-m", "queues", "worker", queue]
            + ["--redis", url, "--processor", processor]
            + ["--concurrency", str(concurrency)]
            + ["--lock-duration", str(LOCK_DURATION_MS)]
            + ["--stalled-interval", str(STALLED_INTERVAL_MS)]
            + ["--drain-delay", str(DRAIN_DELAY_S)]
        )
        self.env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), PYTHONUNBUFFERED="1")
        self.env.pop("REDIS_URL", None)
        self.procs: list[subprocess.Popen[bytes]] = [self._spawn(p) for p in self.logs]

    def _spawn(self, log: Path) -> subprocess.Popen[bytes]:
        with open(log, "ab") as out:
            return subprocess.Popen(
                self.argv,
                cwd=REPO_ROOT,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )

    def kill_and_restart(self, i: int) -> tuple[int, float]:
        """SIGKILL process `i`, reap it and start a new one in its place; the
        killed pid and a `time.time()` read once it was reaped."""
        old = self.procs[i]
        old.kill()
        old.wait(10)
        killed_at = time.time()
        self.procs[i] = self._spawn(self.logs[i])
        return old.pid, killed_at

    def wait_ready(self, url: str, queue: str, timeout: float = 30.0) -> None:
        """Wait until every process has its named connection open."""

        def ready() -> bool:
            assert self.exited() == [], self.log_text()
            with Queue(queue, url) as q:
                return int(q.get_workers_count()) >= len(self.procs)

        wait_until(ready, timeout, 0.1, what="the worker processes to connect")

    def exited(self) -> list[tuple[int, int]]:
        """(pid, status) of every process that has exited."""
        return [(p.pid, p.returncode) for p in self.procs if p.poll() is not None]

    def log_text(self) -> str:
        return "\n".join(
            f"--- {path.name}\n{path.read_text(errors='replace')[-6000:]}"
            for path in self.logs
        )

    def stop(self, timeout: float = 20.0) -> list[int]:
        """SIGTERM each (SIGKILL after timeout); their exit statuses."""
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for p in self.procs:
            try:
                p.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)
        return [int(p.returncode) for p in self.procs]


# --- faults ---------------------------------------------------------------------
def shutdown_and_restart(server: RedisServer, admin: redis.Redis) -> None:
    """SHUTDOWN (AOF written), down 1 s, then the same server started again."""
    try:
        admin.shutdown()
    except redis.ConnectionError:
        pass
    assert server.proc is not None
    server.proc.wait(10)
    time.sleep(1.0)
    server.start()


def stop_beyond_lock(server: RedisServer, admin: redis.Redis) -> None:
    """SIGSTOP for 1.5 x the lock duration: every lock expires meanwhile."""
    assert server.proc is not None
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        time.sleep(LOCK_DURATION_MS / 1000 * 1.5)
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)


def kill_clients(server: RedisServer, admin: redis.Redis) -> None:
    """CLIENT KILL of every other normal connection (the workers' too)."""
    admin.client_kill_filter(_type="normal", skipme=True)


def fill_memory(server: RedisServer, admin: redis.Redis) -> None:
    """maxmemory reached (noeviction), then lifted: longer than the workers'
    drain delay (a short one, set on their command line), so that idle
    workers' claims are refused too."""
    admin.config_set("maxmemory-policy", "noeviction")
    admin.config_set("maxmemory", 1)
    try:
        time.sleep(DRAIN_DELAY_S + 1.0)
    finally:
        admin.config_set("maxmemory", 0)


FAULTS: dict[str, Fault] = {
    "shutdown+restart (AOF)": shutdown_and_restart,
    "SIGSTOP beyond the lock": stop_beyond_lock,
    "CLIENT KILL": kill_clients,
    "maxmemory": fill_memory,
}


def settle(url: str, queue: str, timeout: float = 20.0) -> None:
    """Wait until nothing is waiting or active (what a fault stranded has
    come back and run), so that each job meets at most one fault."""

    def idle() -> bool:
        try:
            with Queue(queue, url) as q:
                counts = q.get_counts("wait", "active", "delayed")
        except redis.RedisError:
            return False
        return not any(counts.values())

    wait_until(idle, timeout, 0.1, what="the queue to drain after a fault")


def not_completed(url: str, queue: str, ids: list[str]) -> list[str]:
    """The ids among `ids` whose job is not in completed."""
    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        key = Queue(queue, client).keys.completed
        scores = client.zmscore(key, ids) if ids else []
    finally:
        client.close()
    return [i for i, score in zip(ids, scores) if score is None]
