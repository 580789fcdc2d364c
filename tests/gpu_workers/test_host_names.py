"""Naming a host: BULLPEN_HOSTNAME (manage.py runworkers) or --host (either
entry point) names a supervisor in Redis, and the docs say so."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from gpu_workers import Fleet
from tests.helpers import wait_until

ROOT = Path(__file__).resolve().parents[2]


def doc_section(doc: str, title: str) -> str:
    text = (ROOT / doc).read_text()
    start = text.index(f"# {title}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def test_docs_say_how_to_name_a_host() -> None:
    """The configuration table lists BULLPEN_HOSTNAME (and the namespace all
    hosts share); "Several hosts" names both ways to set the name, its
    default, the characters allowed and why it must be unique."""
    table = doc_section("docs/configuration.md", "GPU workers and supervisors")
    assert re.search(r"^\| `BULLPEN_HOSTNAME` \|", table, re.M)
    assert re.search(r"^\| `BULLPEN_NAMESPACE` \|", table, re.M)
    hosts = " ".join(doc_section("docs/operations.md", "Several hosts").split())
    for needed in (
        "BULLPEN_HOSTNAME",
        "manage.py runworkers --host NAME",
        "python -m gpu_workers",
        "socket.gethostname()",
        "letters, digits, `_`, `.` or `-`",
        "never share",
    ):
        assert needed in hosts, needed


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Supervisor processes, stopped (SIGTERM, then SIGKILL) at teardown."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        proc.send_signal(signal.SIGTERM)
    for proc in started:
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_setting_and_flag_name_two_hosts_on_one_redis(
    redis_url: str, qname: str, processes: list[subprocess.Popen[bytes]]
) -> None:
    """`manage.py runworkers` under BULLPEN_HOSTNAME=node-b and `python -m
    gpu_workers --host node-a` on one Redis are two live hosts, each with its
    own worker, whose id starts with its host name."""
    env = {
        **os.environ,
        "REDIS_URL": redis_url,
        "BULLPEN_HOSTNAME": "node-b",
        "BULLPEN_GPUS": "sim:1x8GiB",
        "BULLPEN_WORKERS": f"{qname}:1",
        "BULLPEN_HANDLER_MODULES": "gpu_workers.demo_handlers",
    }
    for argv, child_env in (
        ([sys.executable, "manage.py", "runworkers"], env),
        (
            [
                sys.executable,
                "-m",
                "gpu_workers",
                "--redis-url",
                redis_url,
                "--gpus",
                "sim:1x8GiB",
                "--workers",
                f"{qname}:1",
                "--handler-modules",
                "gpu_workers.demo_handlers",
                "--host",
                "node-a",
            ],
            {**os.environ, "BULLPEN_HOSTNAME": "ignored-here"},
        ),
    ):
        processes.append(
            subprocess.Popen(
                argv,
                cwd=ROOT,
                env=child_env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
    fleet = Fleet(redis_url)
    try:

        def both() -> bool:
            hosts = sorted(h["host"] for h in fleet.list_hosts())
            workers = sorted(w["id"] for w in fleet.list_workers())
            return hosts == ["node-a", "node-b"] and len(workers) == 2

        wait_until(both, timeout=30, what="two named hosts with a worker each")
        for host in ("node-a", "node-b"):
            [worker] = fleet.list_workers(host)
            assert worker["id"].startswith(f"{host}:bull:{qname}:")
    finally:
        fleet.close()


@override_settings(BULLPEN_HOSTNAME="my laptop", BULLPEN_GPUS="sim:1x8GiB")
def test_a_host_name_with_other_characters_is_refused() -> None:
    """A name outside letters, digits, `_ . -` stops runworkers at once with
    a message that says what a host name may hold; --host overrides it."""
    with pytest.raises(CommandError, match="a host name must be letters"):
        call_command("runworkers", "--check")
    call_command("runworkers", "--check", "--host", "laptop-1")
