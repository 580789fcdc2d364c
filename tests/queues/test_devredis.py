"""The throwaway redis-server of tests, benches and `make run`
(queues/devredis.py): a port it picked itself and another process bound
before redis-server did is picked again, never a failed start; a script
that dies without stopping it leaves no redis-server behind, and no process
leaves its temporary folder."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from queues.devredis import RedisClusterSet, RedisServer
from tests.helpers import wait_until


def taken(port: int) -> socket.socket:
    """A socket listening on `port`, as another process's would be."""
    s = socket.socket()
    s.bind(("127.0.0.1", port))
    s.listen()
    return s


def test_a_picked_port_taken_before_the_start_is_picked_again() -> None:
    server = RedisServer()
    first = server.port
    with taken(first):
        server.start()
        try:
            assert server.port != first
            assert redis.Redis(port=server.port).ping()
        finally:
            server.stop()


def test_a_port_given_or_known_to_clients_is_never_changed() -> None:
    """A port the caller named, or the port of a restart (its clients know
    it), stays: taken, the start fails saying which."""
    other = RedisServer().start()
    try:
        with pytest.raises(RuntimeError, match=str(other.port)):
            RedisServer(port=other.port).start()
    finally:
        other.stop()
    server = RedisServer().start()
    try:
        port = server.port
        server.stop()
        with taken(port), pytest.raises(RuntimeError, match=str(port)):
            server.start()
    finally:
        server.stop()


def test_a_cluster_node_whose_bus_port_was_taken_starts_on_new_ports() -> None:
    cluster = RedisClusterSet(primaries=3)
    node = cluster.servers[0]
    bus = int(node.extra_args[node.extra_args.index("--cluster-port") + 1])
    with taken(bus):
        cluster.start()
        try:
            assert str(bus) not in node.extra_args
            client = redis.RedisCluster(host="127.0.0.1", port=node.port)
            assert client.cluster_info()["cluster_state"] == "ok"
            client.close()
        finally:
            cluster.stop()


def test_a_sentinel_from_a_config_text_is_picked_again_too() -> None:
    """A config text (what only a file may hold: a sentinel's `sentinel
    monitor`) is read first; a sentinel whose picked port was taken starts on
    another, monitoring what its text says."""
    primary = RedisServer().start()
    sentinel = RedisServer(
        extra_args=("--sentinel",),
        config=f"sentinel monitor m 127.0.0.1 {primary.port} 1\n",
    )
    first = sentinel.port
    try:
        with taken(first):
            sentinel.start()
        assert sentinel.port != first
        client = redis.Redis(port=sentinel.port, decode_responses=True)
        assert client.info("server")["redis_mode"] == "sentinel"
        assert client.sentinel_master("m")["port"] == primary.port
        client.close()
    finally:
        sentinel.stop()
        primary.stop()


#: A script that starts a RedisServer, prints its pid and folder, then forks
#: a child that exits through sys.exit (running the handlers it inherited)
#: and waits for it, and finally dies of an uncaught exception.
CRASHES = """
import os, sys
from queues.devredis import RedisServer
server = RedisServer().start()
print(server.proc.pid, server.dir, flush=True)
child = os.fork()
if child == 0:
    sys.exit(0)
os.waitpid(child, 0)
print("alive" if server.proc.poll() is None else "stopped by the child", flush=True)
print("kept" if os.path.isdir(server.dir) else "removed by the child", flush=True)
raise RuntimeError("a bench script's bug")
"""


def test_a_script_that_dies_of_an_exception_leaves_no_redis_server() -> None:
    """redis-server runs in a session of its own (make run stops it last), so
    it outlived a script that died without stop(): it is stopped at exit,
    by the process that started it only (a forked child's exit leaves it)."""
    done = _run(CRASHES)
    assert done.returncode == 1 and "a bench script's bug" in done.stderr
    pid, folder, *after_fork = done.stdout.split()
    pid = int(pid)
    try:
        assert after_fork == ["alive", "kept"], done.stdout
        wait_until(lambda: not _running(pid), 10, what="the redis-server to stop")
        assert not Path(folder).exists()
    finally:
        if _running(pid):  # (a failed run leaves nothing either)
            os.kill(pid, signal.SIGKILL)


#: A script that starts a RedisServer from a thread that then ends, and one
#: from its main thread, prints whether the first outlived its thread and both
#: pids, then dies of SIGKILL (no at-exit handler runs).
KILLED = """
import os, signal, threading, time
from queues.devredis import RedisServer
started = []
thread = threading.Thread(target=lambda: started.append(RedisServer().start()))
thread.start()
thread.join()
time.sleep(0.5)
print("alive" if started[0].proc.poll() is None else "stopped", flush=True)
server = RedisServer().start()
print(server.proc.pid, started[0].proc.pid, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_a_sigkilled_process_leaves_no_redis_server_it_started() -> None:
    """A SIGKILLed pytest or bench runs no at-exit handler, and its
    redis-servers (each in a session of its own) ran on: now each gets
    SIGTERM when the process dies (Linux's parent-death signal). That signal
    follows the thread that started the server, so a server started from
    another thread goes without it (and does not die with that thread)."""
    done = _run(KILLED)
    assert done.returncode == -signal.SIGKILL, done.stderr
    outlived, pids = done.stdout.split("\n", 1)
    pid, from_thread = (int(p) for p in pids.split())
    try:
        assert outlived == "alive"
        wait_until(lambda: not _running(pid), 10, what="the redis-server to stop")
    finally:
        for left in (pid, from_thread):
            if _running(left):
                os.kill(left, signal.SIGKILL)


#: Servers stopped, restarted and stopped again, one never started, a cluster.
STOPS = """
from queues.devredis import RedisClusterSet, RedisServer
server = RedisServer().start()
server.restart()
server.stop()
idle = RedisServer()
cluster = RedisClusterSet(primaries=3).start()
cluster.stop()
print(" ".join([server.dir, idle.dir, *(s.dir for s in cluster.servers)]))
"""


def test_a_process_that_exits_leaves_no_redis_folder() -> None:
    """Each RedisServer has a temporary folder (its --dir, a config text, a
    cluster node's nodes.conf): kept while its process lives, so a stopped
    server can start again, and removed when that process exits."""
    done = _run(STOPS)
    assert done.returncode == 0, done.stderr
    folders = done.stdout.split()
    assert len(folders) == 5
    assert [f for f in folders if Path(f).exists()] == []


def _run(script: str) -> subprocess.CompletedProcess[str]:
    """`script` run by Python in a process of its own, from the repository."""
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _running(pid: int) -> bool:
    """Whether `pid` runs (a zombie, or a pid reused by another program, do not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z" and b"redis-server" in cmdline
