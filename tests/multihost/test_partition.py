"""Real hosts, one cut off mid-job: Redis, two GPU hosts (supervisors on
simulated GPUs) and a dashboard, each in its own network namespace.

Host A is cut off the network while it runs jobs. Its heartbeat expires and
the dashboard no longer lists it; its jobs' locks expire, the stalled check
returns them to wait (docs/protocol.md §4.9) and host B takes them. The link
comes back while B runs them: A's late finishes are refused, their locks
being B's (docs/protocol.md §4.7), no job runs a third time, and every job
completed once, with B's result.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import redis

from dashboard.run import daphne_args
from gpu_workers import Fleet
from queues import Queue
from queues.devredis import find_redis_server
from tests.dashboard.daphne_helpers import dashboard_env, migrate, viewer_session
from tests.helpers import wait_until

from .handlers import HOST_VAR
from .netns import Network

ROOT = Path(__file__).resolve().parents[2]
HOSTS = ("redis", "host-a", "host-b", "dash")
#: Each namespace is new: nothing else listens on these ports there.
REDIS_PORT = 7000
DASH_PORT = 8000
#: Short locks and stalled checks, so a cut-off host's jobs move within seconds.
LOCK_MS = 2000
STALLED_MS = 1000
#: Long enough for a job to be running when its host is cut off, and for A's
#: late finish to reach Redis while B still runs the job.
JOB_S = 4.0
#: Slots per GPU host: each holds two of the four jobs at the cut, so A
#: surely has its share, and B then takes both of A's at once.
SLOTS = 2
JOBS = 2 * SLOTS
#: What a refused finish reads in the worker's log, by code: the lock is held
#: by another worker (-6), or is gone (-2) should B finish first
#: (docs/protocol.md §4.7).
REFUSED = "job {} finished as completed but was not saved (code {}"


def supervisor_config(redis_url: str, host: str, queue: str) -> dict[str, Any]:
    """One simulated GPU, SLOTS slots, short heartbeats, locks and checks."""
    return {
        "redis_url": redis_url,
        "host": host,
        "gpus": "sim:1x24GiB",
        "queues": [
            {
                "queue": queue,
                "slots": SLOTS,
                "lock_duration_ms": LOCK_MS,
                "stalled_interval_ms": STALLED_MS,
            }
        ],
        "handler_modules": ["tests.multihost.handlers"],
        "child_env": {HOST_VAR: host},
        "heartbeat_interval_s": 0.2,
        "heartbeat_ttl_s": 1.0,
        "reconcile_interval_s": 0.2,
        "control_interval_s": 0.05,
        "drain_timeout_s": 5.0,
    }


class Cluster:
    """The running hosts of one test: addresses, clients, logs."""

    def __init__(self, net: Network, tmp_path: Path, queue: str) -> None:
        self.net = net
        self.tmp = tmp_path
        self.queue_name = queue
        self.runs = tmp_path / "runs.txt"
        self.runs.touch()
        self.redis_url = f"redis://{net.address('redis')}:{REDIS_PORT}/0"
        self.dash_url = f"http://{net.address('dash')}:{DASH_PORT}"
        self.session = ""
        self.client = redis.Redis.from_url(self.redis_url, decode_responses=True)

    def log(self, name: str) -> str:
        path = self.tmp / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def logs(self) -> str:
        """Every process's output, for a failing assertion."""
        return "\n".join(
            f"----- {name} -----\n{self.log(name)[-4000:]}" for name in HOSTS
        )

    def start(self, name: str, argv: Sequence[str], **env: str) -> None:
        with open(self.tmp / f"{name}.log", "wb") as out:
            self.net.popen(
                name,
                argv,
                cwd=ROOT,
                env={**os.environ, "PYTHONPATH": str(ROOT), **env},
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def start_redis(self) -> None:
        self.start(
            "redis",
            [
                find_redis_server(),
                *("--bind", self.net.address("redis"), "--port", str(REDIS_PORT)),
                *("--save", "", "--appendonly", "no", "--dir", str(self.tmp)),
                *("--protected-mode", "no"),
            ],
        )
        client = redis.Redis.from_url(self.redis_url, socket_timeout=1)

        def answers() -> bool:
            try:
                return bool(client.ping())
            except redis.RedisError:
                return False

        wait_until(answers, timeout=10, interval=0.05, what="redis to answer")
        client.close()

    def start_dashboard(self) -> None:
        address = self.net.address("dash")
        env = dashboard_env(self.tmp, self.redis_url, DJANGO_ALLOWED_HOSTS=address)
        migrate(env)
        self.session = viewer_session(env)
        self.start("dash", [sys.executable, *daphne_args(address, DASH_PORT)], **env)

        def answers() -> bool:
            try:
                return self.dashboard_hosts() is not None
            except OSError:
                return False

        wait_until(answers, timeout=30, interval=0.1, what="the dashboard")

    def start_gpu_host(self, host: str) -> None:
        config = supervisor_config(self.redis_url, host, self.queue_name)
        self.start(
            host,
            [sys.executable, "-m", "gpu_workers", "--config", json.dumps(config)],
            PYTHONUNBUFFERED="1",
        )

    def dashboard_hosts(self) -> str:
        """The GPU page's hosts panel, as the logged-in viewer sees it."""
        request = urllib.request.Request(
            f"{self.dash_url}/gpus/fragments/hosts/",
            headers={"Cookie": f"sessionid={self.session}"},
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            assert response.status == 200
            return str(response.read().decode())

    def shown(self) -> set[str]:
        """The hosts the dashboard lists."""
        page = self.dashboard_hosts()
        return {h for h in ("host-a", "host-b") if f'data-host="{h}"' in page}

    def run_lines(self) -> list[list[str]]:
        return [line.split() for line in self.runs.read_text().splitlines()]

    def ended(self, host: str) -> set[str]:
        """The jobs whose run on `host` ended."""
        return {f[1] for f in self.run_lines() if f[0] == "end" and f[2] == host}

    def starts(self) -> dict[str, list[str]]:
        """Job id -> the hosts that started it, in order."""
        found: dict[str, list[str]] = {}
        for fields in self.run_lines():
            if fields[0] == "start":
                found.setdefault(fields[1], []).append(fields[2])
        return found


@pytest.fixture
def cluster(
    make_network: Callable[[Sequence[str]], Network], tmp_path: Path, qname: str
) -> Iterator[Cluster]:
    """Redis, the dashboard and both GPU hosts up, each in its namespace."""
    cluster = Cluster(make_network(HOSTS), tmp_path, qname)
    try:
        cluster.start_redis()
        for host in ("host-a", "host-b"):
            cluster.start_gpu_host(host)
        cluster.start_dashboard()
        yield cluster
    finally:
        cluster.client.close()
        print(cluster.logs())  # shown when the test failed
    # The network fixture ends every process and removes the namespaces.


def test_a_cut_off_host_loses_its_jobs_to_the_other_and_its_late_finish_is_refused(
    cluster: Cluster,
) -> None:
    """Host A, cut off mid-job, disappears from the dashboard; B takes A's jobs
    once their locks expire; back online, A's finishes are refused (lock
    lost), no job runs a third time and each completed exactly once, by B."""
    fleet = Fleet(cluster.redis_url)
    queue = Queue(cluster.queue_name, cluster.redis_url)
    both = {"host-a", "host-b"}
    try:
        wait_until(
            lambda: (
                {w["host"] for w in fleet.list_workers()} == both
                and cluster.shown() == both
            ),
            timeout=30,
            interval=0.1,
            what="both GPU hosts on the dashboard",
        )
        ids = [
            queue.add("multihost.run", {"s": JOB_S, "runs": str(cluster.runs)}).id
            for _ in range(JOBS)
        ]

        def all_started() -> dict[str, list[str]]:
            starts = cluster.starts()
            return starts if len(starts) == JOBS else {}

        started = wait_until(all_started, timeout=10, what="every job to start")
        on_a = sorted(j for j, hosts in started.items() if hosts == ["host-a"])
        on_b = sorted(j for j, hosts in started.items() if hosts == ["host-b"])
        assert len(on_a) == len(on_b) == SLOTS, started

        cut_at = time.monotonic()
        cluster.net.cut("host-a")

        # A's heartbeats expire: Redis and the dashboard no longer list it.
        wait_until(
            lambda: (
                cluster.shown() == {"host-b"}
                and {h["host"] for h in fleet.list_hosts()} == {"host-b"}
            ),
            timeout=10,
            interval=0.1,
            what="host A to be gone from the dashboard",
        )
        gone_s = time.monotonic() - cut_at

        # Its locks expire, B's stalled check returns its jobs to wait, and B
        # takes them (A could take them back, were it online: so the link
        # stays cut till then); A, cut off, has run both to their end.
        def b_took_all() -> bool:
            starts = cluster.starts()
            return all(starts[j] == ["host-a", "host-b"] for j in on_a)

        wait_until(b_took_all, timeout=20, what="B to take A's jobs")
        wait_until(
            lambda: cluster.ended("host-a") == set(on_a),
            timeout=10,
            what="A to run its jobs to their end",
        )
        assert queue.get_counts("failed")["failed"] == 0
        cluster.net.restore("host-a")
        restored_at = time.monotonic()

        # A's late finishes reach Redis and are refused: the locks are lost.
        def refusals() -> dict[str, str]:
            log = cluster.log("host-a")
            return {
                j: code
                for j in on_a
                for code in ("-6", "-2")
                if REFUSED.format(j, code) in log
            }

        refused = wait_until(
            lambda: len(r := refusals()) == len(on_a) and r,
            timeout=30,
            interval=0.1,
            what="host A's late finishes to be refused",
        )
        refused_s = time.monotonic() - restored_at

        # B runs A's jobs to the end; A is back on the dashboard.
        wait_until(
            lambda: queue.get_counts("completed")["completed"] == JOBS,
            timeout=30,
            interval=0.1,
            what="B to complete every job",
        )
        wait_until(
            lambda: cluster.shown() == both,
            timeout=10,
            interval=0.1,
            what="host A to be back on the dashboard",
        )

        # B's stalled check moved A's jobs; nothing ran a third time, nothing
        # was lost: each job completed once, with B's result.
        moved = " ".join(
            line.partition("moved stalled jobs back to wait: ")[2]
            for line in cluster.log("host-b").splitlines()
        ).replace(",", " ")
        assert set(on_a) <= set(moved.split()), cluster.log("host-b")
        starts = cluster.starts()
        assert sorted(starts) == sorted(ids)
        for job_id in on_a:
            assert starts[job_id] == ["host-a", "host-b"], starts
        for job_id in on_b:
            assert starts[job_id] == ["host-b"], starts
        counts = queue.get_counts()
        assert counts["completed"] == JOBS and sum(counts.values()) == JOBS, counts
        for job_id in ids:
            job = queue.get_job(job_id)
            assert job is not None
            assert job.returnvalue == {"host": "host-b"}, job_id
        events: list[tuple[str, dict[str, str]]]
        events = cluster.client.xrange(queue.keys.events)  # type: ignore[assignment]
        completed = sorted(e["jobId"] for _, e in events if e["event"] == "completed")
        assert completed == sorted(ids), events
        print(
            f"A gone {gone_s:.1f} s after the cut; its finishes refused "
            f"{refused_s:.1f} s after the restore, codes {refused}"
        )
    finally:
        queue.close()
        fleet.close()
