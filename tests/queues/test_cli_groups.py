"""The groups commands of `python -m queues` (docs/groups.md), run as real
subprocesses: `add --group`, `groups` (and `--find`), `group`, `group-set`,
`group-pause`, `group-resume`; bad input is one `error:` line and exit 2."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from queues import Queue
from tests.queues.test_cli import assert_error, cli, ok
from tests.queues.transitions.helpers import claimed, move_to_active


@pytest.fixture
def queue(redis_url: str, qname: str) -> Iterator[Queue]:
    """An in-process Queue on the same queue the CLI acts on."""
    with Queue(qname, redis_url) as q:
        yield q


def test_add_group_and_list_groups(redis_url: str, queue: Queue) -> None:
    """`add --group` puts the job in its group; `groups` lists the largest
    backlog first (table and JSON); `group` shows one."""
    for group, n in (("small", 1), ("big", 3)):
        for _ in range(n):
            ok(cli(redis_url, "add", queue.name, "job", "--group", group))
    job = queue.get_job("1")
    assert job is not None and job.opts["group"] == {"id": "small"}
    table = ok(cli(redis_url, "groups", queue.name)).splitlines()
    assert table[0].split()[:3] == ["GROUP", "WAITING", "ACTIVE"]
    assert [row.split()[:2] for row in table[1:3]] == [["big", "3"], ["small", "1"]]
    assert table[-1] == "2 groups"
    listed = json.loads(ok(cli(redis_url, "groups", queue.name, "--json")))
    assert [(g["id"], g["waiting"]) for g in listed] == [("big", 3), ("small", 1)]
    page = json.loads(
        ok(
            cli(
                redis_url,
                "groups",
                queue.name,
                "--start",
                "1",
                "--count",
                "1",
                "--json",
            )
        )
    )
    assert [g["id"] for g in page] == ["small"]
    shown = json.loads(ok(cli(redis_url, "group", queue.name, "big", "--json")))
    assert shown["id"] == "big" and shown["waiting"] == 3
    assert "waiting:" in ok(cli(redis_url, "group", queue.name, "big"))


def test_groups_find_by_part_of_the_id(redis_url: str, queue: Queue) -> None:
    """`groups --find TEXT` lists the groups whose id holds TEXT, largest
    backlog first, with how many matched; bad text and --start are refused."""
    queue.add_bulk(
        [
            {"name": "j", "data": {}, "opts": {"group": g}}
            for g, n in (("acme/eu", 1), ("acme/us", 3), ("beta", 5), ("xacme", 2))
            for _ in range(n)
        ]
    )
    table = ok(cli(redis_url, "groups", queue.name, "--find", "acme")).splitlines()
    assert [row.split()[0] for row in table[1:-1]] == ["acme/us", "xacme", "acme/eu"]
    assert table[-1] == "3 groups whose id holds 'acme'"
    top = json.loads(
        ok(
            cli(
                redis_url,
                "groups",
                queue.name,
                "--find",
                "acme",
                "--count",
                "1",
                "--json",
            )
        )
    )
    assert [(g["id"], g["waiting"]) for g in top] == [("acme/us", 3)]
    none = ok(cli(redis_url, "groups", queue.name, "--find", "zzz")).splitlines()
    assert none[-1] == "0 groups whose id holds 'zzz'"
    assert_error(cli(redis_url, "groups", queue.name, "--find", "a*"), "group must")
    assert_error(
        cli(redis_url, "groups", queue.name, "--find", "a", "--start", "1"),
        "no --start",
    )


def test_groups_name_each_state(redis_url: str, queue: Queue) -> None:
    """`groups` says which groups take turns (ready), which are paused, which
    wait for one of their running jobs to end (at-concurrency, as their jobs'
    waiting reason says), which only run jobs (running: nothing waits, maybe
    forgotten by the index); `group` says it too, in JSON as well."""
    for group in ("solo", "busy", "busy", "stopped", "capped", "capped"):
        queue.add("job", {}, group=group)
    queue.pause_group("stopped")
    queue.set_group("capped", concurrency=1)
    assert len(claimed(move_to_active(queue, count=3))) == 3  # solo, busy, capped
    table = ok(cli(redis_url, "groups", queue.name)).splitlines()
    states = {row.split()[0]: row.split()[-1] for row in table[1:-1]}
    assert states == {
        "busy": "ready",
        "stopped": "paused",
        "solo": "running",
        "capped": "at-concurrency",
    }
    assert "state:            at-concurrency" in ok(
        cli(redis_url, "group", queue.name, "capped")
    )
    shown = json.loads(ok(cli(redis_url, "groups", queue.name, "--json")))
    assert {g["id"]: g["state"] for g in shown} == states


def test_group_set_pause_resume(redis_url: str, queue: Queue) -> None:
    """group-set changes the settings given ('none' clears), pause and
    resume toggle the group."""
    ok(cli(redis_url, "add", queue.name, "job", "--group", "acme"))
    out = ok(
        cli(
            redis_url,
            "group-set",
            queue.name,
            "acme",
            "--weight",
            "3",
            "--concurrency",
            "2",
            "--rate-max",
            "5",
            "--rate-duration-ms",
            "1000",
        )
    )
    assert out.startswith("group acme: weight=3")
    info = queue.get_group("acme")
    assert info is not None
    assert (info.weight, info.concurrency, info.rate_max) == (3, 2, 5)
    ok(cli(redis_url, "group-set", queue.name, "acme", "--concurrency", "none"))
    info = queue.get_group("acme")
    assert info is not None and info.concurrency is None and info.weight == 3
    assert (
        ok(cli(redis_url, "group-pause", queue.name, "acme")) == "paused group acme\n"
    )
    info = queue.get_group("acme")
    assert info is not None and info.paused
    ok(cli(redis_url, "group-resume", queue.name, "acme"))
    info = queue.get_group("acme")
    assert info is not None and not info.paused


def test_group_commands_refuse_bad_input(redis_url: str, queue: Queue) -> None:
    """Unknown group, bad numbers, no setting, a bad group id."""
    ok(cli(redis_url, "add", queue.name, "job", "--group", "acme"))
    assert_error(cli(redis_url, "group", queue.name, "nobody"), "no group 'nobody'")
    assert_error(
        cli(redis_url, "group-set", queue.name, "acme", "--weight", "0"), ">= 1"
    )
    assert_error(
        cli(redis_url, "group-set", queue.name, "acme", "--weight", "x"), "'x'"
    )
    assert_error(cli(redis_url, "group-set", queue.name, "acme"), "--weight")
    assert_error(cli(redis_url, "add", queue.name, "job", "--group", "a:b"), "group")
