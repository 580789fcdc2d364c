"""A host project that sets no BULLPEN_* setting at all (tests/hostproject,
which names only its REDIS_URL), served by daphne from the asgi.py that
docs/embedding.md gives, taken from the doc verbatim: the page and the live
socket under /ops/queues/ answer, and a superuser's walk of every page,
fragment, chart series, export, probe, /metrics and the API's reads meets no
5xx."""

from __future__ import annotations

import asyncio
import html
import http.client
import json
import os
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

import tests.hostproject.settings as host_settings
from queues import Queue
from queues.devredis import free_port
from tests.dashboard.daphne_helpers import ROOT, LiveSocket
from tests.dashboard.helpers import gpu_fleet, run_jobs
from tests.dashboard.test_mounted import P
from tests.helpers import wait_until

#: URLs a page makes the browser GET: links, htmx GETs, the charts' series.
GET_ATTRS = re.compile(r'\b(?:href|src|hx-get|data-[a-z-]+-url)="([^"]*)"')
#: Paths the walk never GETs: actions (POST only), the socket, the logout.
SKIPPED = re.compile(r"/actions/|/ws/live/|/logout/|/static/")
#: Visits per path (its query strings vary: tabs, pages, sorts) and in all.
PER_PATH, MOST = 4, 400


def doc_asgi() -> str:
    """The fenced Python block of docs/embedding.md's ASGI section, verbatim."""
    text = (ROOT / "docs" / "embedding.md").read_text()
    section = text.split("## 3. ASGI", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def bare_env(tmp: Path, redis_url: str) -> dict[str, str]:
    """The host's environment less every BULLPEN_* variable, its Redis the
    test one, its database a file of its own, the doc's asgi.py importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BULLPEN_")}
    env.update(
        DJANGO_SETTINGS_MODULE="tests.hostproject.settings",
        REDIS_URL=redis_url,
        HOST_DB_PATH=str(tmp / "host.sqlite3"),
        PYTHONPATH=os.pathsep.join([str(tmp), str(ROOT)]),
        PYTHONUNBUFFERED="1",
    )
    return env


_SUPERUSER = """
from django.contrib.auth.models import User
from django.test import Client
client = Client()
client.force_login(User.objects.create_superuser("root", "", "pw"))
print(client.cookies["sessionid"].value)
"""


def django_admin(env: dict[str, str], *args: str) -> str:
    """`python -m django ...` in the host's environment; its stdout."""
    done = subprocess.run(
        [sys.executable, "-m", "django", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


class Host:
    """The daphne serving the host, and a superuser's session on it."""

    def __init__(self, port: int, session: str, log: Path, env: dict[str, str]) -> None:
        self.port, self.session, self.log, self.env = port, session, log, env

    def get(self, url: str, token: str = "") -> tuple[int, str, bytes]:
        """GET with the session, or an API token (no redirect followed):
        status, content type, body."""
        headers = {"Cookie": f"sessionid={self.session}"}
        if token:
            headers = {"Authorization": f"Bearer {token}"}
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            conn.request("GET", url, headers=headers)
            response = conn.getresponse()
            body = response.read()
            return response.status, response.getheader("Content-Type", ""), body
        finally:
            conn.close()


@pytest.fixture
def host(tmp_path: Path, redis_url: str) -> Iterator[Host]:
    """Daphne serving the doc's asgi.py with the host's settings."""
    (tmp_path / "docasgi.py").write_text(doc_asgi())
    env = bare_env(tmp_path, redis_url)
    django_admin(env, "migrate", "--noinput", "-v", "0")
    session = django_admin(env, "shell", "-c", _SUPERUSER).strip().splitlines()[-1]
    port = free_port()
    log = tmp_path / "daphne.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port)]
            + ["docasgi:application"],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    served = Host(port, session, log, env)

    def answers() -> bool:
        assert proc.poll() is None, log.read_text(errors="replace")
        try:
            return served.get(P + "healthz")[0] == 200
        except OSError:
            return False

    try:
        wait_until(answers, timeout=60, interval=0.1, what="daphne to answer")
        yield served
    finally:
        proc.kill()
        proc.wait()


def test_the_host_sets_no_bullpen_setting() -> None:
    """What the walk below stands on: the host's settings name no BULLPEN_*."""
    assert "BULLPEN_API_MAX_BODY_BYTES" not in os.environ
    assert not [n for n in vars(host_settings) if n.startswith("BULLPEN_")]


def test_the_docs_asgi_serves_pages_and_the_live_socket(
    host: Host, r: redis.Redis, qname: str
) -> None:
    """The asgi.py of docs/embedding.md, pasted as is, serves the overview
    and the live socket under the prefix, which sends a followed queue's
    counts."""
    Queue(qname, r).add("job", {})
    status, _, body = host.get(P)
    assert status == 200 and f'data-live-socket="{P}ws/live/"'.encode() in body

    async def follow() -> dict[str, object]:
        url = f"http://127.0.0.1:{host.port}"
        sock = await LiveSocket.open(url, host.session, path=P + "ws/live/")
        try:
            sock.send({"type": "subscribe", "queues": [f"bull:{qname}"]})
            while True:
                message = await asyncio.wait_for(sock.messages.get(), 20)
                if message["type"] == "counts":
                    return message
        finally:
            sock.close()

    assert asyncio.run(follow())["type"] == "counts"


def _data(r: redis.Redis, redis_url: str, qname: str) -> list[str]:
    """A queue with jobs in several states, a scheduler, a GPU fleet; the
    walk's first URLs."""
    q = Queue(qname, redis_url)
    [failed] = run_jobs(q, 1, target="failed")
    run_jobs(q, 1, target="completed", value={"ok": 1})
    q.add("waiting", {"x": 1})
    q.add("later", {}, delay=60_000)
    q.upsert_job_scheduler("tick", every_ms=60_000)
    gpu_fleet(r)
    q.close()
    base = f"{P}queues/bull/{qname}/"
    return [
        P,
        base,
        f"{base}jobs/{failed}/",
        base + "schedulers/",
        base + "export/?state=failed",
        P + "gpus/",
        P + "gpu-time/",
        P + "gpu-time.csv",
        P + "redis/",
        P + "workers/",
        P + "search/?state=failed",
        P + "triage/",
        f"{P}triage/bull/{qname}/",
        P + "audit/",
        P + "metrics",
        P + "healthz",
        P + "readyz",
        P + "api/v1/openapi.json",
    ]


def _api_reads(host: Host, qname: str, job_id: str) -> list[str]:
    """Every GET of the API's OpenAPI document, but its event streams."""
    _, _, body = host.get(P + "api/v1/openapi.json")
    spec = json.loads(body)
    server = spec["servers"][0]["url"]
    return [
        server + path.replace("{queue}", qname).replace("{job_id}", job_id)
        for path, ops in spec["paths"].items()
        if "get" in ops and not path.endswith("/events")
    ]


def test_every_page_answers_without_any_bullpen_setting(
    host: Host, r: redis.Redis, redis_url: str, qname: str
) -> None:
    """A superuser walks every URL the pages link or fetch, from the
    overview, a queue, a job, schedulers, GPUs, GPU time, Redis, workers,
    search, triage, audit, /metrics, the probes and the API's reads (with a
    token): no answer is a 5xx."""
    todo = _data(r, redis_url, qname)
    visits: dict[str, int] = {}
    per_path: Counter[str] = Counter()
    while todo and len(visits) < MOST:
        url = html.unescape(todo.pop(0))
        path = url.split("?")[0]
        if url in visits or SKIPPED.search(path) or per_path[path] >= PER_PATH:
            continue
        per_path[path] += 1
        status, kind, body = host.get(url)
        visits[url] = status
        if kind.startswith("text/html"):
            found = GET_ATTRS.findall(body.decode(errors="replace"))
            todo.extend(u for u in found if u.startswith(P))
    job_id = next(u for u in visits if "/jobs/" in u).split("/jobs/")[1].strip("/")
    made = django_admin(
        host.env, "apitoken", "create", "--name=walk", "--queues=*", "--json"
    )
    token = json.loads(made.strip().splitlines()[-1])["token"]
    for url in _api_reads(host, qname, job_id):
        visits[url] = host.get(url, token)[0]
        assert visits[url] != 401, url
    failed = {u: s for u, s in visits.items() if s >= 500}
    assert not failed, (failed, host.log.read_text(errors="replace")[-3000:])
    assert visits[P] == visits[f"{P}queues/bull/{qname}/"] == 200
    assert {P + "redis/", P + "workers/fragments/list/"} <= set(visits)
    assert any("/series/" in u for u in visits), sorted(visits)
    assert len(visits) > 40, sorted(visits)  # the walk went past the start
