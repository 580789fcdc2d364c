"""The websocket fan-out half of bench/dashboard.py: clients in processes
(spread over one or more dashboard servers), a progress producer, Redis
command counting per server process, and duplicate detection per client."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import random
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


#: A client's connect: tries before it gives up, the first retry's longest
#: wait (s, doubling per try: full jitter, a uniform wait up to it), and how
#: long one try may take (s). A reconnect storm (every client at once, on a
#: loaded machine) rides out refused or timed-out connects this way, counted.
CONNECT_TRIES = 5
CONNECT_BACKOFF_S = 0.25
CONNECT_TIMEOUT_S = 10.0


def backoff_s(attempt: int, base: float = CONNECT_BACKOFF_S, cap: float = 8.0) -> float:
    """Full jitter: a uniform wait in 0..min(cap, base * 2**attempt)."""
    return random.uniform(0, min(cap, base * 2**attempt))


def pct(values: list[float], q: float) -> float:
    """The q-quantile (0..1) of values, nearest rank."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def redis_url_of(r: Any) -> str:
    kw = r.connection_pool.connection_kwargs
    host, port, db = kw.get("host", "127.0.0.1"), kw.get("port", 6379), kw.get("db", 0)
    return f"redis://{host}:{port}/{db}"


def wait_port(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("daphne did not start")


def client_proc(
    ports: list[int],
    cookie: str,
    count: int,
    seconds: float,
    ready: Any,
    go: Any,
    out: Any,
    offset: int = 0,
) -> None:
    """`count` websocket clients following bull:busy, spread round-robin over
    the servers' ports, all connecting at once; reports progress delays,
    frames carrying an event id the client already had (duplicates),
    handshakes that failed, connects retried and clients that gave up after
    CONNECT_TRIES failed connects."""
    import asyncio

    from autobahn.asyncio.websocket import (
        WebSocketClientFactory,
        WebSocketClientProtocol,
    )

    delays: list[float] = []
    received = [0]
    frames = [0]
    opened = [0]
    failed: list[str] = []
    retries = [0]
    gave_up: list[str] = []
    duplicates = [0]
    window = {"start": None, "end": None}
    subscribed = asyncio.Event()

    def settled() -> None:
        if opened[0] + len(failed) + len(gave_up) >= count:
            subscribed.set()

    class Client(WebSocketClientProtocol):  # type: ignore[misc]
        def onOpen(self) -> None:  # noqa: N802 - autobahn's API
            self.seen: set[str] = set()
            self.sendMessage(
                json.dumps({"type": "subscribe", "queues": ["bull:busy"]}).encode()
            )

        def onClose(self, clean: bool, code: Any, reason: Any) -> None:  # noqa: N802
            if not getattr(self, "counted", False):
                self.counted = True
                failed.append(f"{code} {reason}")
                settled()

        def onMessage(self, payload: bytes, is_binary: bool) -> None:  # noqa: N802
            now = time.time()
            frame = json.loads(payload)
            frames[0] += 1
            found = frame["messages"] if frame.get("type") == "batch" else [frame]
            for msg in found:
                self.one(msg, now)

        def one(self, msg: dict[str, Any], now: float) -> None:
            if msg.get("type") == "counts" and not getattr(self, "counted", False):
                self.counted = True
                opened[0] += 1
                settled()
            if msg.get("type") in ("progress", "event"):
                if msg["id"] in self.seen:
                    duplicates[0] += 1
                self.seen.add(msg["id"])
            if msg.get("type") != "progress":
                return
            received[0] += 1
            sent = (msg.get("progress") or {}).get("t")
            start, end = window["start"], window["end"]
            if sent and start and sent >= start and (end is None or sent <= end):
                delays.append(now - sent)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        factories = []
        for port in ports:
            factory = WebSocketClientFactory(
                f"ws://127.0.0.1:{port}/ws/live/",
                origin=f"http://127.0.0.1:{port}",
                headers={"Cookie": cookie},
            )
            factory.protocol = Client
            factories.append((factory, port))

        async def connect(i: int) -> None:
            factory, port = factories[(offset + i) % len(factories)]
            error = ""
            for attempt in range(CONNECT_TRIES):
                try:
                    await asyncio.wait_for(
                        loop.create_connection(factory, "127.0.0.1", port),
                        CONNECT_TIMEOUT_S,
                    )
                    return
                except OSError as e:  # refused, reset, timed out (TimeoutError)
                    error = f"{type(e).__name__}: {e}"
                if attempt + 1 < CONNECT_TRIES:
                    retries[0] += 1
                    await asyncio.sleep(backoff_s(attempt))
            gave_up.append(error)
            settled()

        await asyncio.gather(*(connect(i) for i in range(count)))
        await asyncio.wait_for(subscribed.wait(), 60)
        ready.set()
        while not go.is_set():
            await asyncio.sleep(0.01)
        window["start"] = time.time()
        await asyncio.sleep(seconds)
        window["end"] = time.time()
        await asyncio.sleep(1.0)  # stragglers of the window
        out.put(
            {
                "delays": delays,
                "received": received[0],
                "frames": frames[0],
                "clients": count,
                "duplicates": duplicates[0],
                "failed": failed,
                "connect_retries": retries[0],
                "gave_up": gave_up,
            }
        )

    asyncio.run(main())


def produce(queue: Any, ids: list[str], rate: float, seconds: float) -> int:
    """Progress updates round-robin over ids at `rate`/s; returns how many."""
    from queues import Job

    jobs = [Job(queue, i) for i in ids]
    sent = 0
    start = time.perf_counter()
    while True:
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return sent
        due = int(elapsed * rate) + 1
        while sent < due:
            jobs[sent % len(jobs)].update_progress(
                {"t": time.time(), "percent": sent % 100}
            )
            sent += 1
        time.sleep(min(0.002, 1 / rate))


class CommandCounter(threading.Thread):
    """Counts the commands clients send (MONITOR), by client address; commands
    run inside Lua scripts are not counted (INFO commandstats counts those)."""

    def __init__(self, redis_url: str) -> None:
        super().__init__(daemon=True)
        import redis

        self.client = redis.Redis.from_url(redis_url)
        self.by_client: dict[str, int] = {}
        self.by_command: dict[str, int] = {}
        self.stopping = threading.Event()
        self.started_ok = threading.Event()

    def run(self) -> None:
        conn = self.client.connection_pool.get_connection()
        conn.send_command("MONITOR")
        conn.read_response()
        self.started_ok.set()
        while not self.stopping.is_set():
            line = conn.read_response()
            if not isinstance(line, bytes):
                continue
            head, _, rest = line.partition(b"] ")
            who = head.rpartition(b" ")[2].decode(errors="replace")
            if who == "lua":
                continue
            name = rest.split(b'"', 2)[1].decode(errors="replace").lower()
            self.by_client[who] = self.by_client.get(who, 0) + 1
            self.by_command[name] = self.by_command.get(name, 0) + 1
        conn.disconnect()

    def stop(self) -> None:
        self.stopping.set()
        self.client.ping()  # wakes the reader
        self.join(10)


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def socket_ports(pid: int) -> set[int]:
    """Local TCP ports of a process's open sockets (Linux /proc): how Redis's
    client addresses (MONITOR) are told apart per server process."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            parts = line.split()
            if parts[9] in inodes:
                ports.add(int(parts[1].rsplit(":", 1)[1], 16))
    return ports


def fanout(
    ports: list[int],
    cookie: str,
    clients: int,
    procs: int,
    r: Any,
    queue: Any,
    ids: list[str],
    rate: float,
    seconds: float,
    server_pids: list[int],
) -> dict[str, Any]:
    """One run: `clients` sockets spread over the servers, progress at `rate`
    for `seconds`; delays, frames, duplicates, CPU and Redis calls."""
    ctx = mp.get_context("spawn")
    procs = max(1, min(procs, clients))
    ready = [ctx.Event() for _ in range(procs)]
    go = ctx.Event()
    out = ctx.Queue()
    shares = [
        clients // procs + (1 if i < clients % procs else 0) for i in range(procs)
    ]
    offsets = [sum(shares[:i]) for i in range(procs)]
    workers = [
        ctx.Process(
            target=client_proc,
            args=(ports, cookie, n, seconds, ready[i], go, out, offsets[i]),
        )
        for i, n in enumerate(shares)
    ]
    for w in workers:
        w.start()
    for e in ready:
        if not e.wait(90):
            raise RuntimeError("clients did not connect")
    time.sleep(1.0)
    producer = queue.client.client_info()["addr"]
    bench = r.client_info()["addr"]
    counter = CommandCounter(redis_url_of(r))
    counter.start()
    counter.started_ok.wait(10)
    cpu0 = [cpu_s(pid) for pid in server_pids]
    go.set()
    t0 = time.perf_counter()
    sent = produce(queue, ids, rate, seconds)
    spent = time.perf_counter() - t0
    cpus = [cpu_s(pid) - c for pid, c in zip(server_pids, cpu0)]
    server_cpu = sum(cpus)
    server_ports = [socket_ports(pid) for pid in server_pids]
    counter.stop()
    results = [out.get(timeout=60) for _ in workers]
    for w in workers:
        w.join(30)
    delays = [d * 1000 for res in results for d in res["delays"]]
    total = sum(counter.by_client.values())
    dashboard = (
        total - counter.by_client.get(producer, 0) - counter.by_client.get(bench, 0)
    )
    per_server = [
        sum(
            n
            for who, n in counter.by_client.items()
            if who.rpartition(":")[2].isdigit() and int(who.rpartition(":")[2]) in own
        )
        / spent
        for own in server_ports
    ]
    return {
        "clients": clients,
        "servers": len(server_pids),
        "duplicates": sum(res["duplicates"] for res in results),
        "failed_handshakes": [f for res in results for f in res["failed"]],
        "connect_retries": sum(res["connect_retries"] for res in results),
        "gave_up": [g for res in results for g in res["gave_up"]],
        "events_sent": sent,
        "seconds": spent,
        "messages_received": sum(res["received"] for res in results),
        "frames_received": sum(res["frames"] for res in results),
        "delay_p50_ms": pct(delays, 0.5),
        "delay_p95_ms": pct(delays, 0.95),
        "delay_p99_ms": pct(delays, 0.99),
        "delay_max_ms": max(delays or [0]),
        "delays_counted": len(delays),
        "daphne_cpu_s": server_cpu,
        "daphne_cpu_s_by_server": cpus,
        "daphne_cpu_us_per_message": 1e6
        * server_cpu
        / max(sum(res["received"] for res in results), 1),
        "redis_calls_per_s": total / spent,
        "dashboard_redis_calls_per_s": dashboard / spent,
        "redis_calls_per_s_by_server": per_server,
        "producer_calls": counter.by_client.get(producer, 0),
        "commands": dict(
            sorted(counter.by_command.items(), key=lambda kv: -kv[1])[:12]
        ),
    }


# --- main ---------------------------------------------------------------------------
