"""The dashboard side of bench/fleet.py: a daphne on the Redis under test, a
logged-in session, and timed page requests."""

from __future__ import annotations

import http.client
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))

from throughput_libs import BenchError, percentile  # noqa: E402

from dashboard.run import daphne_args  # noqa: E402
from queues.devredis import free_port  # noqa: E402


def time_page(
    port: int,
    path: str,
    cookie: str,
    n: int,
    slow_ms: float | None = None,
    slow_n: int = 3,
    timeout_s: float = 60,
    before_timed: Any = None,
) -> dict[str, Any]:
    """n timed GETs after one warm-up; p50/p95 of the 200s, statuses counted.
    A warm-up slower than `slow_ms` makes it `slow_n` timed GETs (a page of
    tens of seconds still gets measured in a bounded run; the count is in
    the result). `before_timed` is called after the warm-up (the caller's
    counters start there)."""
    times: list[float] = []
    statuses: dict[str, int] = {}
    body = b""
    i = 0
    while i < n + 1:
        if i == 1 and before_timed is not None:
            before_timed()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
        t0 = time.perf_counter()
        conn.request("GET", path, headers={"Cookie": cookie})
        resp = conn.getresponse()
        body = resp.read()
        ms = (time.perf_counter() - t0) * 1000
        conn.close()
        i += 1
        if i == 1:
            if slow_ms is not None and ms > slow_ms:
                n = min(n, slow_n)
            continue
        statuses[str(resp.status)] = statuses.get(str(resp.status), 0) + 1
        if resp.status == 200:
            times.append(ms)
    out: dict[str, Any] = {"statuses": statuses, "bytes": len(body), "n": n}
    if b"bullpen_redis_up 0" in body:
        # /metrics answers 200 with only bullpen_redis_up 0 when its read fails.
        out["error"] = "bullpen_redis_up 0 (the scrape's Redis read failed)"
        times = []
    if times:
        out["p50_ms"] = percentile(times, 50)
        out["p95_ms"] = percentile(times, 95)
    else:
        out["error"] = body[:300].decode(errors="replace")
    return out


def start_dashboard(
    url: str, workdir: str, env_base: dict[str, str], root: Path = ROOT
) -> tuple[subprocess.Popen[bytes], int, Path]:
    """daphne serving the dashboard of the checkout at `root` (another
    checkout's code: bench/fleet.py --dashboard-root, for a "before" run)."""
    port = free_port()
    log = Path(workdir) / f"daphne-{port}.log"
    env = dict(env_base, REDIS_URL=url)
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, *daphne_args("127.0.0.1", port)],
            cwd=root,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/login/")
            conn.getresponse().read()
            return proc, port, log
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.2)
    raise BenchError(f"daphne did not start: {log.read_text(errors='replace')[-2000:]}")


def login_cookie(workdir: str) -> tuple[dict[str, str], str]:
    """A SQLite database with one superuser, and its session cookie."""
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="dashboard.settings",
        BULLPEN_DB_PATH=os.path.join(workdir, "db.sqlite3"),
        DJANGO_DEBUG="0",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(50),
    )
    os.environ.update(env)
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.test import Client

    call_command("migrate", verbosity=0)
    client = Client()
    client.force_login(User.objects.create_superuser("bench", "", "bench"))
    return env, f"sessionid={client.cookies['sessionid'].value}"


def fmt_page(p: dict[str, Any]) -> str:
    if "error" in p and p["statuses"].get("200"):
        return "redis_up 0"
    if "p95_ms" in p:
        bad = {k: v for k, v in p["statuses"].items() if k != "200"}
        return f"{p['p50_ms']:.0f}/{p['p95_ms']:.0f}" + (f" {bad}" if bad else "")
    return "HTTP " + ",".join(f"{k}x{v}" for k, v in p["statuses"].items())


def stop_dashboard(daphne: subprocess.Popen[bytes] | None) -> None:
    """Stop a daphne start_dashboard started (SIGINT, then SIGKILL after 15 s)."""
    if daphne is None:
        return
    daphne.send_signal(2)
    try:
        daphne.wait(15)
    except subprocess.TimeoutExpired:
        daphne.kill()
