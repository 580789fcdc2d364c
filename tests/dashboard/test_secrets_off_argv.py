"""Secrets stay off command lines and out of the access log: the Redis URL
(password included) reaches worker processes and the demo producer through a
pipe or the environment, and job tickets are redacted in daphne's log."""

from __future__ import annotations

import secrets
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import redis

from dashboard.api.auth import make_ticket
from queues import Queue
from queues.devredis import RedisServer
from tests.dashboard.daphne_helpers import TEST_SECRET_KEY, daphne
from tests.dashboard.test_make_run import descendants, make_run
from tests.helpers import quiet_port, wait_until


def cmdlines(pids: set[int]) -> dict[int, str]:
    """The command line of each pid still running, as ps shows it."""
    found = {}
    for pid in pids:
        try:
            raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        found[pid] = raw.replace(b"\0", b" ").decode(errors="replace")
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_no_process_of_make_run_has_the_redis_password_on_its_command_line(
    tmp_path: Path,
) -> None:
    """make run on a Redis with a password: the dashboard, the supervisor,
    each GPU worker process and the demo producer run, and none of their
    command lines shows the Redis URL or its password."""
    password = secrets.token_hex(12)
    server = RedisServer().start()
    url = f"redis://:{password}@127.0.0.1:{server.port}/0"
    with redis.Redis.from_url(server.url) as client:
        client.config_set("requirepass", password)
    try:
        with make_run(tmp_path, quiet_port(), REDIS_URL=url) as (proc, below):

            def all_up() -> dict[int, str] | None:
                lines = cmdlines(descendants(proc.pid))
                text = "\n".join(lines.values())
                up = (
                    text.count("gpu_workers.child") == 2
                    and "dashboard.demo" in text
                    and "runworkers" in text
                    and "dashboard.asgi" in text
                )
                return lines if up else None

            lines = wait_until(all_up, timeout=60, what="every process of make run")
            below.update(lines)
            leaking = {
                pid: line
                for pid, line in lines.items()
                if password in line or "redis://" in line
            }
            assert not leaking
    finally:
        server.stop()


def test_tickets_are_redacted_in_the_access_log(
    tmp_path: Path, redis_url: str, qname: str, settings: Any
) -> None:
    """A ticketed API request is served, and daphne's access log shows the
    request with `ticket=***`, never the ticket itself."""
    with Queue(qname, redis_url) as q:
        job = q.add("j", {"a": 1})
    settings.SECRET_KEY = TEST_SECRET_KEY  # daphne's key signs the ticket
    ticket = make_ticket(qname, job.id, job.timestamp)
    with daphne(tmp_path, redis_url) as server:
        path = f"/api/v1/queues/{qname}/jobs/{job.id}"
        with urllib.request.urlopen(f"{server.url}{path}?ticket={ticket}") as r:
            assert r.status == 200
        line = wait_until(
            lambda: [ln for ln in server.log_text().splitlines() if path in ln],
            what="the access log line",
        )
        assert f'GET {path}?ticket=***"' in line[0]
        assert ticket not in server.log_text()
