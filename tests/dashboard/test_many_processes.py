"""Several dashboard processes behind one address share everything a user
can see: two real daphne servers on one Redis and one database, behind a
round-robin TCP proxy (as a load balancer puts them), keep one login, one
rate limit per API token, one Idempotency-Key record, one login throttle and
one audit log; every live socket gets each update once, whichever process
serves it; and /metrics answers the same counts from either process.

Both servers (and their own Redis) are started once for the module."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from queues import MetricsOptions, Queue
from queues.devredis import RedisServer
from queues.events import StreamId
from tests.api.helpers import WorkerThread
from tests.dashboard.daphne_helpers import ROOT, Daphne, LiveSocket, daphne
from tests.dashboard.helpers import run_jobs
from tests.dashboard.proxy_helpers import RoundRobinProxy
from tests.helpers import wait_until

#: The password of the users who log in with one (the others get sessions).
PASSWORD = "correct-horse-battery-staple"
#: Failed logins before a username and address are locked out (both servers).
MAX_FAILURES = 3
#: Requests per minute of the rate-limited API token.
TOKEN_LIMIT = 4

_SETUP = """
import json
from django.contrib.auth.models import Group, User
from django.test import Client
from dashboard.api.models import ApiToken

def user(name, group, password=None):
    made = User.objects.create_user(name, password=password)
    made.groups.add(Group.objects.get(name=group))
    return made

def session(made):
    client = Client()
    client.force_login(made)
    return client.cookies["sessionid"].value

user("operator", "operator", {password!r})
user("ops", "viewer", {password!r})
print(json.dumps({{
    "viewer": session(user("viewer", "viewer")),
    "acting": session(user("acting", "operator")),
    "limited": ApiToken.issue("limited", "*", True, True, {limit})[1],
    "writer": ApiToken.issue("writer", "*", True, True, None)[1],
}}))
"""


@dataclass
class Pair:
    """Two dashboard processes, the proxy in front of them, their Redis, and
    the sessions and API tokens made in their database."""

    a: Daphne
    b: Daphne
    proxy: RoundRobinProxy
    redis_url: str
    made: dict[str, str]

    @property
    def servers(self) -> tuple[Daphne, Daphne]:
        return self.a, self.b


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    """Two daphne processes on one Redis (their own, not flushed by other
    tests) and one SQLite file, behind a round-robin proxy."""
    tmp = tmp_path_factory.mktemp("many")
    redis_server = RedisServer().start()
    shared = {
        "BULLPEN_DB_PATH": str(tmp / "db.sqlite3"),
        "BULLPEN_LOGIN_MAX_FAILURES": str(MAX_FAILURES),
    }
    try:
        with ExitStack() as stack:
            a = stack.enter_context(daphne(tmp, redis_server.url, "a.log", **shared))
            b = stack.enter_context(daphne(tmp, redis_server.url, "b.log", **shared))
            setup = _SETUP.format(password=PASSWORD, limit=TOKEN_LIMIT)
            done = subprocess.run(
                [sys.executable, "manage.py", "shell", "-c", setup],
                cwd=ROOT,
                env=a.env,
                check=True,
                capture_output=True,
                text=True,
            )
            made = json.loads(done.stdout.strip().splitlines()[-1])
            proxy = RoundRobinProxy([a.url, b.url])
            stack.callback(proxy.close)
            yield Pair(a, b, proxy, redis_server.url, made)
    finally:
        redis_server.stop()


# --- HTTP as a browser sends it: one new connection per request ------------------
def get(base: str, path: str, **cookies: str) -> requests.Response:
    """GET on a new connection, redirects not followed."""
    return requests.get(base + path, cookies=cookies, allow_redirects=False, timeout=10)


def csrf_of(response: requests.Response) -> tuple[str, str]:
    """The CSRF cookie a page set and the form token it holds."""
    found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', response.text)
    assert found, response.text[:500]
    return response.cookies["csrftoken"], found[1]


def post_form(
    base: str, path: str, csrf: tuple[str, str], data: dict[str, str], **cookies: str
) -> requests.Response:
    """POST a form with its CSRF token, on a new connection."""
    return requests.post(
        base + path,
        data={**data, "csrfmiddlewaretoken": csrf[1]},
        cookies={**cookies, "csrftoken": csrf[0]},
        allow_redirects=False,
        timeout=30,
    )


def logged_in(response: requests.Response) -> bool:
    """Whether a page was served to a logged-in user (it has the logout form)."""
    return response.status_code == 200 and 'action="/logout/"' in response.text


def test_a_login_holds_on_every_process(pair: Pair) -> None:
    """Logging in through the proxy (the login form from one process, the
    password posted to the other) gives a session both processes accept;
    logging out through the proxy ends it on both."""
    proxy = pair.proxy
    mark = proxy.mark()
    form = get(proxy.url, "/login/")
    csrf = csrf_of(form)
    done = post_form(
        proxy.url, "/login/", csrf, {"username": "operator", "password": PASSWORD}
    )
    assert done.status_code == 302, done.text[:500]
    session = done.cookies["sessionid"]
    pages = [get(proxy.url, "/", sessionid=session) for _ in range(2)]
    routed = proxy.since(mark)
    assert routed[0] != routed[1], "the form and the login went to one process"
    assert sorted(routed[2:]) == [0, 1], routed
    assert all(logged_in(page) for page in pages)
    for server in pair.servers:
        assert logged_in(get(server.url, "/", sessionid=session)), server.url
    out = post_form(proxy.url, "/logout/", csrf, {}, sessionid=session)
    assert out.status_code == 302
    for server in pair.servers:
        page = get(server.url, "/", sessionid=session)
        assert page.status_code == 302 and "/login/" in page.headers["Location"]


def test_an_api_token_is_limited_at_its_combined_count(pair: Pair) -> None:
    """Requests of a token allowed TOKEN_LIMIT a minute, alternating between
    the two processes, are refused after TOKEN_LIMIT in all (not per
    process), and then by both processes."""
    proxy = pair.proxy
    bearer = {"Authorization": f"Bearer {pair.made['limited']}"}
    mark = proxy.mark()
    answers = [
        requests.get(f"{proxy.url}/api/v1/queues", headers=bearer, timeout=10)
        for _ in range(TOKEN_LIMIT + 2)
    ]
    routed = proxy.since(mark)
    assert routed == [routed[0], 1 - routed[0]] * (TOKEN_LIMIT // 2 + 1), routed
    statuses = [r.status_code for r in answers]
    assert statuses == [200] * TOKEN_LIMIT + [429, 429], statuses
    remaining = [r.headers["RateLimit-Remaining"] for r in answers[:TOKEN_LIMIT]]
    assert remaining == [str(n) for n in range(TOKEN_LIMIT - 1, -1, -1)]
    for server in pair.servers:
        refused = requests.get(
            f"{server.url}/api/v1/queues", headers=bearer, timeout=10
        )
        assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1


def test_an_idempotency_key_holds_across_processes(pair: Pair, qname: str) -> None:
    """The same Idempotency-Key and body posted to one process then the other
    make one job (the second a replay of the first); another body with that
    key is refused alike by both; the job's ticket reads it on either."""
    bearer = {"Authorization": f"Bearer {pair.made['writer']}"}
    path = f"/api/v1/queues/{qname}/jobs"

    def post(server: Daphne, body: dict[str, Any]) -> requests.Response:
        headers = {**bearer, "Idempotency-Key": "order-17"}
        return requests.post(server.url + path, json=body, headers=headers, timeout=10)

    body = {"name": "render", "data": {"n": 1}}
    first, again = post(pair.a, body), post(pair.b, body)
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json()["id"] == first.json()["id"]
    queue = Queue(qname, pair.redis_url)
    try:
        assert queue.get_counts()["waiting"] == 1
        refused = [post(server, {**body, "data": {"n": 2}}) for server in pair.servers]
        assert [r.status_code for r in refused] == [422, 422]
        assert refused[0].json() == refused[1].json()
        assert refused[0].json()["error"]["code"] == "idempotency_key_reused"
        assert queue.get_counts()["waiting"] == 1
    finally:
        queue.close()
    ticket = first.json()["ticket"]
    for server in pair.servers:
        status = requests.get(
            f"{server.url}{path}/{first.json()['id']}",
            params={"ticket": ticket},
            timeout=10,
        )
        assert status.status_code == 200 and status.json()["state"] == "waiting"


def sse_events(response: requests.Response) -> Iterator[dict[str, str]]:
    """The events of a Server-Sent Events answer as they arrive (`id`,
    `event`, `data`), comments and the retry hint left out."""
    event: dict[str, str] = {}
    for line in response.iter_lines(decode_unicode=True):
        if not line:
            if "event" in event:
                yield event
            event = {}
        elif not line.startswith((":", "retry:")):
            field, _, value = line.partition(":")
            event[field] = value.strip()


def test_server_sent_events_resume_on_the_other_process(pair: Pair, qname: str) -> None:
    """An event stream read from one process resumes on the other with
    Last-Event-ID: the ids are Redis stream ids, so it gets exactly what
    followed."""
    bearer = {"Authorization": f"Bearer {pair.made['writer']}"}
    path = f"/api/v1/queues/{qname}/jobs"
    added = requests.post(
        pair.a.url + path, json={"name": "render"}, headers=bearer, timeout=10
    )
    assert added.status_code == 201
    events = f"{path}/{added.json()['id']}/events"
    with requests.get(
        pair.a.url + events, headers=bearer, stream=True, timeout=10
    ) as first:
        state = next(sse_events(first))
    assert state["event"] == "state" and '"waiting"' in state["data"]
    queue = Queue(qname, pair.redis_url)
    try:
        job = queue.get_job(added.json()["id"])
        assert job is not None
        job.update_progress(40)
        job.update_progress(70)
    finally:
        queue.close()
    resumed = {**bearer, "Last-Event-ID": state["id"]}
    with requests.get(
        pair.b.url + events, headers=resumed, stream=True, timeout=10
    ) as second:
        stream = sse_events(second)
        got = [next(stream), next(stream)]
    assert [(e["event"], json.loads(e["data"])["progress"]) for e in got] == [
        ("progress", 40),
        ("progress", 70),
    ]
    ids = [StreamId.parse(e["id"]) for e in (state, *got)]
    assert ids == sorted(set(ids))


def test_failed_logins_are_throttled_at_their_combined_count(pair: Pair) -> None:
    """MAX_FAILURES wrong passwords for one username, spread over both
    processes, lock it out on both: even the right password is then refused
    (429) by either."""
    csrf = csrf_of(get(pair.a.url, "/login/"))
    servers = [pair.a, pair.b] * MAX_FAILURES
    for server in servers[:MAX_FAILURES]:
        wrong = post_form(
            server.url, "/login/", csrf, {"username": "ops", "password": "nope"}
        )
        assert wrong.status_code == 200 and "sessionid" not in wrong.cookies
    for server in pair.servers:
        right = post_form(
            server.url, "/login/", csrf, {"username": "ops", "password": PASSWORD}
        )
        assert right.status_code == 429, (server.url, right.status_code)
        assert "Too many failed logins" in right.text


def test_actions_on_either_process_share_one_audit_log(pair: Pair, qname: str) -> None:
    """A failed job retried on one process and another retried on the other
    both appear on the audit page, whichever process serves it."""
    queue = Queue(qname, pair.redis_url)
    try:
        first, second = run_jobs(queue, 2, "failed")
    finally:
        queue.close()
    session = pair.made["acting"]
    key = f"bull:{qname}"
    for server, job_id in ((pair.a, first), (pair.b, second)):
        page = get(server.url, f"/queues/bull/{qname}/", sessionid=session)
        assert page.status_code == 200
        token = page.cookies["csrftoken"]
        done = requests.post(
            f"{server.url}/queues/bull/{qname}/jobs/{job_id}/actions/retry/",
            cookies={"sessionid": session, "csrftoken": token},
            headers={"X-CSRFToken": token, "HX-Request": "true"},
            timeout=10,
        )
        assert done.status_code == 200 and "retried job" in done.text, done.text
    for server in pair.servers:
        log = get(server.url, f"/audit/?target={key}", sessionid=session)
        assert log.status_code == 200
        for job_id in (first, second):
            assert f"{key}:{job_id}" in log.text, (server.url, job_id)
        assert log.text.count("job.retry</a>") == 2


#: Live sockets opened through the proxy (split evenly over the processes),
#: and progress updates published (one per job: none coalesced away).
SOCKETS = 6
UPDATES = 12


def test_every_socket_gets_each_update_once(pair: Pair, qname: str) -> None:
    """SOCKETS websockets through the proxy, half on each process, follow one
    queue: each gets every one of UPDATES progress updates and every event
    exactly once; logging the session out then closes them on both."""
    key = f"bull:{qname}"
    session = pair.made["viewer"]
    queue = Queue(qname, pair.redis_url)
    queue.client.hset(queue.keys.meta, "opts.maxLenEvents", 10_000)
    proxy = pair.proxy

    async def test() -> None:
        mark = proxy.mark()
        socks = [await LiveSocket.open(proxy.url, session) for _ in range(SOCKETS)]
        assert Counter(proxy.since(mark)) == {0: SOCKETS // 2, 1: SOCKETS // 2}
        for sock in socks:
            sock.send({"type": "subscribe", "queues": [key]})
        for sock in socks:
            while (await asyncio.wait_for(sock.messages.get(), 10))["type"] != "counts":
                pass
        jobs = [await asyncio.to_thread(queue.add, "j", {}) for _ in range(UPDATES)]
        for step, job in enumerate(jobs, 1):
            await asyncio.to_thread(job.update_progress, step)
        last = await asyncio.to_thread(queue.add, "last", {})
        expected = {(job.id, step) for step, job in enumerate(jobs, 1)}
        stream = queue.client.xrange(queue.keys.events)
        events = [i for i, f in stream if f["event"] != "progress"]
        for n, sock in enumerate(socks):
            seen = []
            while True:
                message = await asyncio.wait_for(sock.messages.get(), 10)
                seen.append(message)
                if message.get("job") == last.id and message.get("event") == "waiting":
                    break
            await asyncio.sleep(0.3)
            while not sock.messages.empty():
                seen.append(sock.messages.get_nowait())
            progress = [
                (m["job"], m["progress"]) for m in seen if m["type"] == "progress"
            ]
            assert Counter(progress) == Counter(expected), f"socket {n}: {progress}"
            assert [m["id"] for m in seen if m["type"] == "event"] == events
        csrf = csrf_of(await asyncio.to_thread(get, pair.a.url, "/login/"))
        out = await asyncio.to_thread(
            post_form, proxy.url, "/logout/", csrf, {}, sessionid=session
        )
        assert out.status_code == 302
        for n, sock in enumerate(socks):
            while (message := await asyncio.wait_for(sock.messages.get(), 10))[
                "type"
            ] != "error":
                pass
            assert "session ended" in message["message"], (n, message)

    try:
        asyncio.run(asyncio.wait_for(test(), 60))
    finally:
        queue.close()


#: Families that describe the moment of the scrape rather than the queues: its
#: own duration, and the Redis server's memory and clients as INFO gave them
#: then (each process's scrape allocates and connects).
OF_THE_MOMENT = {
    "bullpen_scrape_duration_seconds",
    "bullpen_redis_memory_used_bytes",
    "bullpen_redis_connected_clients",
}


def samples(exposition: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of a /metrics answer but those of the moment."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(exposition)
        for s in family.samples
        if family.name not in OF_THE_MOMENT
    }


def test_metrics_are_the_same_from_either_process(pair: Pair, qname: str) -> None:
    """After a worker completed and failed jobs, /metrics from either process
    gives identical samples (queue counts, completed/failed totals, every
    family read from Redis); only the scrape's own duration is the answering
    process's, and its help says so."""
    queue = Queue(qname, pair.redis_url)
    for n in range(5):
        queue.add("j", {"fail": n % 2 == 1}, attempts=1)

    def process(job: Any) -> Any:
        if job.data["fail"]:
            raise ValueError("boom")
        return {"ok": True}

    worker = WorkerThread(qname, process, pair.redis_url, metrics=MetricsOptions(100))
    try:
        wait_until(
            lambda: (
                queue.get_counts("completed", "failed") == {"completed": 3, "failed": 2}
            ),
            what="the jobs to finish",
        )
    finally:
        worker.stop()
        queue.close()
    label = frozenset({("queue", f"bull:{qname}")})

    def scrape() -> list[str]:
        return [get(s.url, "/metrics").text for s in pair.servers]

    def both_list_the_queue() -> list[str] | None:
        texts = scrape()
        found = [
            samples(t).get(("bullpen_queue_completed_total", label)) for t in texts
        ]
        return texts if found == [3.0, 3.0] else None

    texts = wait_until(both_list_the_queue, what="both processes to list the queue")
    a, b = (samples(t) for t in texts)
    assert a == b
    state = {("queue", f"bull:{qname}")}
    assert a[("bullpen_queue_jobs", frozenset({*state, ("state", "completed")}))] == 3
    assert a[("bullpen_queue_jobs", frozenset({*state, ("state", "failed")}))] == 2
    assert a[("bullpen_queue_failed_total", label)] == 2
    for text in texts:
        [family] = [
            f
            for f in text_string_to_metric_families(text)
            if f.name == "bullpen_scrape_duration_seconds"
        ]
        assert "this dashboard process" in family.documentation
