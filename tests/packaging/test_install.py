"""The wheel as a user installs it (deploy/docker/install.sh into a fresh venv
outside the checkout): a producer and `bullpen-worker` on a real Redis, with
the dashboard extra and without it (no Django then); `bullpen migrate`,
`check --deploy`, `collectstatic`, `createsuperuser`, and `bullpen runserver`
answering a logged-in overview, /readyz, /metrics and hashed, compressed
static files."""

from __future__ import annotations

import gzip
import json
import os
import re
import secrets
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from dashboard.cli import MISSING_DJANGO
from queues import Queue
from tests.dashboard.daphne_helpers import daphne_listening
from tests.dashboard.test_production_settings import PRODUCTION
from tests.helpers import serve_logged, stop_process, wait_until
from tests.packaging.deploy_doc import section
from tests.packaging.helpers import ROOT, Installed, install, install_base
from tests.packaging.proxied import Http
from tests.redis_server import RedisServer

pytestmark = pytest.mark.slow

#: The production variables (docs/deploy.md's section 3 names each:
#: tests/deploy/test_deploy_doc.py), on one host name.
HOST = PRODUCTION["DJANGO_ALLOWED_HOSTS"]

PRODUCER = """
import sys
import queues
from queues import Queue

queue = Queue(sys.argv[1], sys.argv[2])
ids = [queue.add("double", {"n": n}).id for n in range(5)]
print(queues.__file__)
print(" ".join(ids))
"""

TASKS = """
def double(job):
    return {"twice": job.data["n"] * 2}
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """install.sh's venv with the dashboard extra (so gpu too)."""
    return install(tmp_path_factory.mktemp("installed"), "dashboard")


@pytest.fixture(scope="module")
def base_only(
    tmp_path_factory: pytest.TempPathFactory, installed: Installed
) -> Installed:
    """The same wheel without extras, as a producer installs it."""
    return install_base(tmp_path_factory.mktemp("base"), installed.wheel)


@pytest.mark.parametrize("which", ["installed", "base_only"])
def test_a_producer_and_bullpen_worker_run_from_the_installed_package(
    which: str, request: pytest.FixtureRequest, redis_url: str, qname: str
) -> None:
    """A plain script adds jobs with the installed `queues` (not the
    checkout's), and `bullpen-worker` completes them with a processor found
    from its current directory."""
    inst: Installed = request.getfixturevalue(which)
    work = inst.work / qname
    work.mkdir()
    (work / "producer.py").write_text(PRODUCER)
    (work / "tasks.py").write_text(TASKS)
    env = inst.env()
    added = subprocess.run(
        [str(inst.venv / "bin" / "python"), "producer.py", qname, redis_url],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert added.returncode == 0, added.stderr
    module, ids = added.stdout.split("\n")[:2]
    assert module.startswith(str(inst.venv)), module
    worker = subprocess.Popen(
        [str(inst.venv / "bin" / "bullpen-worker"), qname, "--processor"]
        + ["tasks:double", "--redis", redis_url],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    queue = Queue(qname, redis_url)
    try:

        def done() -> bool:
            assert worker.poll() is None, worker.communicate()[0]
            return queue.get_counts("completed")["completed"] == 5

        wait_until(done, timeout=30, interval=0.1, what="5 jobs completed")
        results = {}
        for job_id in ids.split():
            job = queue.get_job(job_id)
            assert job is not None
            results[job.data["n"]] = job.returnvalue
        assert results == {n: {"twice": 2 * n} for n in range(5)}
    finally:
        queue.close()
        worker.send_signal(signal.SIGTERM)
        out = worker.communicate(timeout=30)[0].decode()
    assert worker.returncode == 0, out
    assert "5 jobs completed" in out


def test_the_base_install_has_no_django(base_only: Installed) -> None:
    """Without extras the wheel brings the queue core's dependencies only:
    `import queues` and `import gpu_workers` work, Django is not installed."""
    script = (
        "import importlib.util, queues, gpu_workers;"
        "print([m for m in ('django', 'channels', 'daphne', 'whitenoise')"
        " if importlib.util.find_spec(m)])"
    )
    done = base_only.run("python", "-c", script)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    # The console script is there (scripts come with the wheel), and says
    # what to install instead of a traceback.
    done = base_only.run("bullpen", "check")
    assert done.returncode == 2
    assert done.stderr.strip() == MISSING_DJANGO, done.stderr


@pytest.fixture(scope="module")
def production(installed: Installed, redis_server: RedisServer) -> dict[str, str]:
    """The documented production variables, a fresh secret key, this test's
    Redis, the database in the work directory (the installed default)."""
    return dict(
        PRODUCTION,
        DJANGO_SECRET_KEY=secrets.token_urlsafe(50),
        REDIS_URL=redis_server.url,
        BULLPEN_ACCESS_LOG=str(installed.work / "access.log"),
    )


@pytest.fixture(scope="module")
def server(installed: Installed, production: dict[str, str]) -> Iterator[Http]:
    """docs/deploy.md's section 4 block, as written: `pip install` is
    install.sh's venv (the same extra), each `bullpen` command runs in it with
    the production variables, `createsuperuser` with Django's --noinput and
    DJANGO_SUPERUSER_* (as the doc says), `runserver` on a free port."""
    steps = section("4. The dashboard")
    cut = next(i for i, c in enumerate(steps) if c.argv[:2] == ["bullpen", "runserver"])
    first, *setup, run = steps[: cut + 1]
    assert first.argv == ["pip", "install", "bullpen[dashboard]"], first.text
    assert not first.env and all(not c.env for c in setup)
    admin = {
        "DJANGO_SUPERUSER_USERNAME": "ops",
        "DJANGO_SUPERUSER_PASSWORD": "a-long-pass-phrase-42",
        "DJANGO_SUPERUSER_EMAIL": "ops@example.com",
    }
    ran = []
    for step in setup:
        assert step.argv[0] == "bullpen", step.text
        argv, env = step.argv[1:], dict(production)
        if argv == ["createsuperuser"]:
            argv, env = [*argv, "--noinput"], {**env, **admin}
        done = installed.run("bullpen", *argv, **env)
        assert done.returncode == 0, (step.text, done.stdout, done.stderr)
        if argv[0] == "check":
            assert "no issues" in done.stdout and not done.stderr, done.stderr
        ran.append(argv[0])
    assert ran == ["collectstatic", "migrate", "check", "createsuperuser"], ran
    assert (installed.work / "db.sqlite3").is_file()  # the current directory's

    def command(port: int) -> list[str]:
        binary = str(installed.venv / "bin" / run.argv[0])
        return [binary, *run.argv[1:-1], f"127.0.0.1:{port}"]

    def healthy(port: int) -> bool:
        try:
            return Http("127.0.0.1", port, HOST).get("/healthz").status == 200
        except OSError:
            return False

    proc, port = serve_logged(
        command,
        installed.work / "server.log",
        daphne_listening,
        healthy,
        cwd=installed.work,
        env=installed.env(**production),
    )
    try:
        yield Http("127.0.0.1", port, HOST)
    finally:
        stop_process(proc, 15)


def test_bullpen_runserver_serves_the_dashboard_as_installed(
    installed: Installed, server: Http, redis_url: str, qname: str
) -> None:
    """Logged in over HTTP (behind a TLS proxy, as in production), the
    overview shows the queue and refers to hashed static files, served
    gzipped and cached for a year; /readyz and /metrics answer; the access
    log hides tickets and tokens."""
    queue = Queue(qname, redis_url)
    queue.add("double", {"n": 1})
    queue.close()
    server.login("ops", "a-long-pass-phrase-42")
    page = server.get("/")
    assert page.status == 200, page.body[:500]
    html = page.text()
    assert qname in html
    assert "script-src 'self'" in page.headers["Content-Security-Policy"]
    assert all(s.startswith("/static/") for s in re.findall(r'src="([^"]+)"', html))
    css = re.search(r'href="(/static/dashboard/dashboard\.[0-9a-f]{12}\.css)"', html)
    assert css, html[:2000]
    static = server.get(css[1], headers={"Accept-Encoding": "gzip"})
    assert static.status == 200
    assert static.headers["Content-Encoding"] == "gzip"
    cache = static.headers["Cache-Control"]
    assert "immutable" in cache and "max-age=315360000" in cache, cache
    source = ROOT / "dashboard" / "console" / "static" / "dashboard" / "dashboard.css"
    assert gzip.decompress(static.body) == source.read_bytes()

    ready = server.get("/readyz")
    assert ready.status == 200, ready.body
    assert json.loads(ready.body)["status"] == "ok"
    metrics = server.get("/metrics?token=s3cret")
    assert metrics.status == 200
    waiting = rf'^bullpen_queue_jobs\{{[^}}]*{qname}[^}}]*"wait\w*"\}} 1\.0$'
    assert re.search(waiting, metrics.text(), re.M), metrics.text()[:3000]
    access = (installed.work / "access.log").read_text()
    assert "/metrics?token=***" in access and "s3cret" not in access


def test_the_dockerfile_healthcheck_passes_against_the_server(
    installed: Installed, server: Http, production: dict[str, str]
) -> None:
    """deploy/docker/Dockerfile's HEALTHCHECK command, run with the
    installed venv's python, answers 0 against a running server."""
    text = (ROOT / "deploy" / "docker" / "Dockerfile").read_text()
    (command,) = re.findall(r"^HEALTHCHECK .*?CMD (\[.*\])$", text, re.M)
    argv = json.loads(command)
    assert argv[0] == "python"
    done = installed.run(*argv, BULLPEN_PORT=str(server.port), **production)
    assert done.returncode == 0, done.stderr


def test_the_documented_api_token_enqueues_on_the_installed_server(
    installed: Installed, server: Http, production: dict[str, str], redis_url: str
) -> None:
    """docs/deploy.md's `bullpen apitoken create ...`, as written, prints a
    token that enqueues a job through the running server's API."""
    (step,) = [c for c in section("4. The dashboard") if c.argv[1:2] == ["apitoken"]]
    done = installed.run(*step.argv, **production)
    assert done.returncode == 0, done.stderr
    token = re.search(r"^token:\s+(\S+)$", done.stdout, re.M)
    assert token, done.stdout
    queue = step.argv[step.argv.index("--queues") + 1]
    reply = server.request(
        "POST",
        f"/api/v1/queues/{queue}/jobs",
        body=json.dumps({"name": "txt2img", "data": {"prompt": "a cat"}}).encode(),
        headers={
            "Authorization": f"Bearer {token[1]}",
            "Content-Type": "application/json",
        },
    )
    assert reply.status == 201, reply.body[:500]
    job_id = json.loads(reply.body)["id"]
    with Queue(queue, redis_url) as q:
        job = q.get_job(job_id)
        assert job is not None and job.data == {"prompt": "a cat"}


def test_the_installed_gpu_supervisor_works_a_job(
    installed: Installed, redis_url: str, qname: str
) -> None:
    """`python -m gpu_workers` of the install, configured by the environment
    as the GPU image is, completes a demo job on a simulated GPU; its worker
    process imports the installed package without site-packages put ahead of
    the standard library on its PYTHONPATH."""
    env = installed.env(
        REDIS_URL=redis_url,
        BULLPEN_GPUS="sim:1x24GiB",
        BULLPEN_WORKERS=f"{qname}:1",
        BULLPEN_HOSTNAME="installed-host",
    )
    proc = subprocess.Popen(
        [str(installed.venv / "bin" / "python"), "-m", "gpu_workers"],
        cwd=installed.work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        with Queue(qname, redis_url) as queue:
            job = queue.add("demo", {"vram": "1GiB", "steps": 1, "step_s": 0.01})

            def completed() -> bool:
                assert proc.poll() is None, proc.communicate()[0]
                return queue.get_job_state(job.id) == "completed"

            wait_until(completed, timeout=30, what="the installed worker's job")
        children = [
            pid
            for pid in os.listdir("/proc")
            if pid.isdigit() and _ppid(pid) == proc.pid
        ]
        assert children
        for pid in children:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            paths = [e for e in environ if e.startswith(b"PYTHONPATH=")]
            assert not paths or b"site-packages" not in paths[0], paths
    finally:
        proc.send_signal(signal.SIGTERM)
        out = proc.communicate(timeout=30)[0].decode()
    assert proc.returncode == 0, out


def _ppid(pid: str) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return -1
    return int(stat.rsplit(")", 1)[1].split()[1])
