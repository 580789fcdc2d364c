"""`python -m queues`, run as a real subprocess against the test redis-server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from queues import JobState, Queue
from tests.helpers import wait_until
from tests.redis_server import free_port

ROOT = Path(__file__).resolve().parents[2]
PROCESSORS = "tests.queues.cli_processors"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env.update(extra)
    return env


def cli(
    redis_url: str | None,
    *args: str,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `python -m queues [--redis URL] ARGS...` and capture its output."""
    head = ["--redis", redis_url] if redis_url else []
    return subprocess.run(
        [sys.executable, "-m", "queues", *head, *args],
        cwd=ROOT,
        env=env or _env(),
        capture_output=True,
        text=True,
        timeout=60,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    """The stdout of a run that must have succeeded."""
    assert result.returncode == 0, result.stderr
    return result.stdout


def assert_error(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    """Exit 2 with exactly one `error: ...` line on stderr, no traceback, no stdout."""
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.fixture
def queue(redis_url: str, qname: str) -> Iterator[Queue]:
    """An in-process Queue on the same queue the CLI acts on."""
    with Queue(qname, redis_url) as q:
        yield q


def start_worker(
    redis_url: str, qname: str, processor: str, *extra: str
) -> subprocess.Popen[str]:
    """Start `python -m queues worker` in the background."""
    path = f"{PROCESSORS}:{processor}"
    return subprocess.Popen(
        [sys.executable, "-m", "queues", "worker", qname, "--redis", redis_url]
        + ["--processor", path, *extra],
        cwd=ROOT,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def stop_worker(proc: subprocess.Popen[str], sig: int = signal.SIGTERM) -> str:
    """Signal the worker, check it exits 0, and return its stderr."""
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    return err


# --- happy paths ---------------------------------------------------------------
def test_add_prints_the_id_and_stores_data_and_options(
    redis_url: str, queue: Queue
) -> None:
    """`add` prints the new id; data, priority, attempts and backoff are stored."""
    first = ok(cli(redis_url, "add", queue.name, "resize", "--data", '{"x": 1}'))
    assert first == "1\n"
    options = ["--priority", "5", "--attempts", "3", "--job-id", "custom"]
    backoff = ["--backoff", '{"type": "exponential", "delay": 100}']
    data = ["--data", '{"x": 2}']
    out = ok(cli(redis_url, "add", queue.name, "resize", *data, *options, *backoff))
    assert out == "custom\n"
    job = queue.get_job("custom")
    assert job is not None and job.data == {"x": 2} and job.priority == 5
    assert job.opts["attempts"] == 3
    assert job.opts["backoff"] == {"type": "exponential", "delay": 100}
    assert queue.get_job("1").data == {"x": 1}


def test_add_delay_lifo_and_numeric_backoff(redis_url: str, queue: Queue) -> None:
    """--delay makes a delayed job, --lifo runs first, a bare --backoff is fixed ms."""
    ok(cli(redis_url, "add", queue.name, "later", "--delay", "60000"))
    ok(cli(redis_url, "add", queue.name, "a"))
    options = ["--lifo", "--backoff", "250", "--attempts", "2"]
    lifo_id = ok(cli(redis_url, "add", queue.name, "b", *options)).strip()
    assert queue.get_counts("delayed", "waiting") == {"delayed": 1, "waiting": 2}
    job = queue.get_job(lifo_id)
    assert job.lifo and job.opts["backoff"] == {"type": "fixed", "delay": 250}
    assert job.data == {}
    assert queue.client.lindex(queue.keys.wait, -1) == lifo_id


def test_counts_prints_a_table_or_json(redis_url: str, queue: Queue) -> None:
    """`counts` lists every state; --json prints the same numbers as an object."""
    queue.add_bulk([{"name": "n", "data": {"x": i}} for i in range(3)])
    queue.add("d", delay=60_000)
    table = ok(cli(redis_url, "counts", queue.name)).splitlines()
    assert table[0].split() == ["STATE", "COUNT"]
    rows = dict(line.split() for line in table[1:])
    assert rows["waiting"] == "3" and rows["delayed"] == "1" and rows["failed"] == "0"
    counts = json.loads(ok(cli(redis_url, "counts", queue.name, "--json")))
    assert counts == queue.get_counts()


def test_jobs_lists_one_line_per_job(redis_url: str, queue: Queue) -> None:
    """`jobs` prints id, name, state, attempts and truncated data, newest first."""
    queue.add("short", {"x": 1})
    queue.add("long", {"text": "y" * 500})
    queue.add("later", {"x": 3}, delay=60_000)
    lines = ok(cli(redis_url, "jobs", queue.name)).splitlines()
    assert lines[0].split() == ["ID", "NAME", "STATE", "ATTEMPTS", "DATA", "RESULT"]
    assert [line.split()[:4] for line in lines[1:]] == [
        ["3", "later", "delayed", "0/1"],
        ["2", "long", "waiting", "0/1"],
        ["1", "short", "waiting", "0/1"],
    ]
    assert all(len(line) < 160 for line in lines)
    assert '{"text":"yyy' in lines[2] and "..." in lines[2]

    page = ["--state", "wait", "--asc", "--start", "0", "--end", "0"]
    lines = ok(cli(redis_url, "jobs", queue.name, *page)).splitlines()
    assert [line.split()[0] for line in lines[1:]] == ["1"]
    assert ok(cli(redis_url, "jobs", queue.name, "--state", "failed")) == ""
    lines = ok(cli(redis_url, "jobs", queue.name, "--start", "1")).splitlines()
    assert [line.split()[0] for line in lines[1:]] == ["2", "1"]

    states = ["--state", "delayed", "waiting"]
    jobs = json.loads(ok(cli(redis_url, "jobs", queue.name, "--json", *states)))
    assert [(j["id"], j["state"]) for j in jobs] == [
        ("3", "delayed"),
        ("2", "waiting"),
        ("1", "waiting"),
    ]
    assert jobs[0]["data"] == {"x": 3}


def test_worker_processes_jobs_and_logs_each_failure(
    redis_url: str, queue: Queue
) -> None:
    """The worker completes jobs, logs one stderr line per failed job, and stops on
    SIGTERM with exit 0; `jobs` then shows results and reasons."""
    queue.add_bulk([{"name": "ok", "data": {"x": i}} for i in range(5)])
    queue.add_bulk([{"name": "bad", "data": {"x": i, "fail": True}} for i in (7, 8)])
    options = ["--concurrency", "3", "--name", "cli-test", "--lock-duration", "5000"]
    options += ["--stalled-interval", "5000"]
    proc = start_worker(redis_url, queue.name, "double", *options)
    try:
        wait_until(
            lambda: (
                queue.get_counts("completed", "failed") == {"completed": 5, "failed": 2}
            ),
            15,
        )
    finally:
        err = stop_worker(proc)
    failures = [line for line in err.splitlines() if " failed on attempt " in line]
    assert len(failures) == 2, err
    assert any(
        "job 6 (bad) failed on attempt 1 of 1 (no attempts left): "
        "ValueError: boom on 7 second line" in line
        for line in failures
    )
    assert queue.get_job("1").returnvalue == {"doubled": 0}

    # The two failures run side by side (concurrency 3), so either may finish
    # last; the listing's promise is newest first, a tie by id descending.
    finished = {i: queue.get_job(i).finished_on for i in ("6", "7")}
    assert None not in finished.values(), finished
    newest_first = sorted(finished, key=lambda i: (finished[i], i), reverse=True)
    lines = ok(cli(redis_url, "jobs", queue.name, "--state", "failed")).splitlines()
    rows = {line.split()[0]: line for line in lines[1:]}
    assert [line.split()[:3] for line in lines[1:]] == [
        [i, "bad", "failed"] for i in newest_first
    ]
    assert "boom on 8\\nsecond line" in rows["7"]
    completed = ok(cli(redis_url, "jobs", queue.name, "--state", "completed"))
    assert '{"doubled":8}' in completed


def test_worker_runs_an_async_processor_and_a_dotted_path(
    redis_url: str, queue: Queue
) -> None:
    """An `async def` processor and a `module:Class.attr` path both work."""
    queue.add("a", {"x": 21})
    proc = start_worker(redis_url, queue.name, "async_double")
    try:
        wait_until(lambda: queue.get_counts("completed")["completed"] == 1, 15)
    finally:
        stop_worker(proc)
    assert queue.get_job("1").returnvalue == 42
    queue.add("b", {"x": 4})
    proc = start_worker(redis_url, queue.name, "Namespace.process")
    try:
        wait_until(lambda: queue.get_counts("completed")["completed"] == 2, 15)
    finally:
        stop_worker(proc, signal.SIGINT)
    assert queue.get_job("2").returnvalue == {"doubled": 8}


def test_worker_stops_gracefully_letting_the_running_job_finish(
    redis_url: str, queue: Queue
) -> None:
    """SIGINT during a job: the job completes, the worker exits 0 and takes no more."""
    queue.add("slow", {"seconds": 1.5})
    proc = start_worker(redis_url, queue.name, "slow")
    try:
        wait_until(lambda: queue.get_counts("active")["active"] == 1, 15)
        queue.add("next", {"seconds": 0})
    finally:
        stop_worker(proc, signal.SIGINT)
    assert queue.get_job_state("1") is JobState.COMPLETED
    assert queue.get_job("1").returnvalue == "slept"
    assert queue.get_job_state("2") is JobState.WAITING


def test_a_clean_stop_does_not_warn_of_running_jobs(
    redis_url: str, queue: Queue
) -> None:
    """SIGTERM after the jobs are done: no warning that a job is still
    running after the close timeout, since none is."""
    queue.add_bulk([{"name": "d", "data": {"x": i}} for i in range(3)])
    proc = start_worker(redis_url, queue.name, "double", "--concurrency", "100")
    try:
        wait_until(lambda: queue.get_counts("completed")["completed"] == 3, 15)
    finally:
        err = stop_worker(proc)
    assert "still running" not in err, err


def test_retry_clean_pause_and_resume(redis_url: str, queue: Queue) -> None:
    """Failed jobs are retried, completed ones cleaned; pause and resume the queue."""
    queue.add_bulk([{"name": "bad", "data": {"x": i, "fail": True}} for i in range(3)])
    queue.add("ok", {"x": 1})
    proc = start_worker(redis_url, queue.name, "double")
    try:
        wait_until(
            lambda: (
                queue.get_counts("failed", "completed") == {"failed": 3, "completed": 1}
            ),
            15,
        )
    finally:
        stop_worker(proc)
    assert ok(cli(redis_url, "retry", queue.name)) == "retried 3 failed jobs\n"
    assert queue.get_counts("failed", "waiting") == {"failed": 0, "waiting": 3}
    assert queue.get_job("1").failed_reason is None

    grace = ["--state", "completed", "--grace", "3600000"]
    out = ok(cli(redis_url, "clean", queue.name, *grace))
    assert out == "removed 0 completed jobs\n"
    out = ok(cli(redis_url, "clean", queue.name, "--state", "completed"))
    assert out == "removed 1 completed jobs\n"
    assert queue.get_job("4") is None
    out = ok(cli(redis_url, "clean", queue.name, "--state", "wait", "--limit", "2"))
    assert out == "removed 2 waiting jobs\n"
    assert queue.get_counts("waiting") == {"waiting": 1}

    assert ok(cli(redis_url, "pause", queue.name)) == f"paused {queue.name}\n"
    assert queue.is_paused()
    assert f"queue {queue.name} is paused" in ok(cli(redis_url, "counts", queue.name))
    assert ok(cli(redis_url, "resume", queue.name)) == f"resumed {queue.name}\n"
    assert not queue.is_paused()


def test_retry_completed_jobs(redis_url: str, queue: Queue) -> None:
    """`retry --state completed` moves completed jobs back to wait."""
    queue.add("ok", {"x": 1})
    proc = start_worker(redis_url, queue.name, "double")
    try:
        wait_until(lambda: queue.get_counts("completed")["completed"] == 1, 15)
    finally:
        stop_worker(proc)
    out = ok(cli(redis_url, "retry", queue.name, "--state", "completed"))
    assert out == "retried 1 completed jobs\n"
    assert queue.get_job_state("1") is JobState.WAITING


def test_global_options_before_or_after_the_command_and_redis_url_env(
    redis_url: str, r: redis.Redis, qname: str
) -> None:
    """--redis/--prefix work on either side of the command; REDIS_URL is the default."""
    env = _env(REDIS_URL=redis_url)
    assert ok(cli(None, "--prefix", "other", "add", qname, "n", env=env)) == "1\n"
    assert r.exists(f"other:{qname}:id")
    after = ["n", "--prefix", "other", "--redis", redis_url]
    assert ok(cli(None, "add", qname, *after)) == "2\n"
    out = ok(cli(None, "counts", qname, "--prefix", "other", "--json", env=env))
    counts = json.loads(out)
    assert counts["waiting"] == 2
    assert_error(cli(redis_url, "counts", qname), "unknown queue", "'bull:")


# --- errors ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("tests.queues.no_such_module:double", "cannot import processor module"),
        (f"{PROCESSORS}:no_such_function", "has no attribute 'no_such_function'"),
        (f"{PROCESSORS}:Namespace.missing", "has no attribute 'Namespace.missing'"),
        (f"{PROCESSORS}:NOT_CALLABLE", "is not callable (its type is int)"),
        (PROCESSORS, "bad processor path"),
        (f"{PROCESSORS}:", "bad processor path"),
        (":double", "bad processor path"),
        (f"{PROCESSORS}:double:extra", "bad processor path"),
        ("tests..queues:double", "bad processor path"),
        ("tests/queues/cli_processors.py:double", "bad processor path"),
    ],
)
def test_bad_processor_path_is_one_error_line(
    redis_url: str, qname: str, path: str, message: str
) -> None:
    """Each kind of bad --processor gives one `error:` line and exit 2."""
    result = cli(redis_url, "worker", qname, "--processor", path)
    assert_error(result, message)


@pytest.mark.parametrize(
    "args",
    [
        ["counts"],
        ["jobs"],
        ["retry"],
        ["clean", "--state", "failed"],
        ["pause"],
        ["resume"],
    ],
)
def test_read_and_admin_commands_refuse_an_unknown_queue(
    redis_url: str, r: redis.Redis, qname: str, args: list[str]
) -> None:
    """A queue with no keys is unknown (a typo), and the command creates none."""
    result = cli(redis_url, args[0], qname, *args[1:])
    assert_error(result, f"unknown queue '{qname}'")
    assert r.keys("*") == []


def test_a_queue_with_only_a_meta_key_is_known(
    redis_url: str, r: redis.Redis, qname: str
) -> None:
    """Any queue-level key (here meta, as a pause leaves) makes the queue known."""
    r.hset(f"bull:{qname}:meta", "paused", "1")
    assert ok(cli(redis_url, "resume", qname)) == f"resumed {qname}\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--data", "{not json"], "--data is not valid JSON"),
        (["--backoff", "{'type': 'fixed'}"], "--backoff is not valid JSON"),
        (["--priority", "-1"], "priority must be an integer"),
        (["--delay", "-5"], "delay must be a number of ms >= 0"),
        (["--attempts", "-2"], "attempts must be an integer >= 0"),
        (["--job-id", "123"], "cannot be an integer"),
        (["--job-id", "a:b"], "cannot contain ':'"),
        (["--backoff", '"soon"'], "backoff must be a number of ms or a dict"),
        (["--backoff", '{"delay": 5}'], "backoff needs a 'type'"),
    ],
)
def test_add_rejects_bad_json_and_job_options(
    redis_url: str, r: redis.Redis, qname: str, args: list[str], message: str
) -> None:
    """Invalid JSON or job options: one `error:` line, exit 2, nothing stored."""
    assert_error(cli(redis_url, "add", qname, "n", *args), message)
    assert r.keys("*") == []


@pytest.mark.parametrize(
    "args",
    [
        ["add", "q", "n"],
        ["counts", "q"],
        ["jobs", "q"],
        ["pause", "q"],
        ["worker", "q", "--processor", f"{PROCESSORS}:double"],
    ],
)
def test_unreachable_redis_is_one_error_line(args: list[str]) -> None:
    """Nothing listening on the port: one `error:` line naming Redis, exit 2."""
    url = f"redis://:hunter2@127.0.0.1:{free_port()}/0"
    result = cli(url, *args)
    assert_error(result, "cannot reach Redis at redis://:***@127.0.0.1:")
    assert "hunter2" not in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["counts", "a:b"], "queue name must be a non-empty string without ':'"),
        (["add", "", "n"], "queue name must be a non-empty string"),
        (["clean", "q"], "the following arguments are required: --state"),
        (["jobs", "q", "--state", "done"], "invalid choice: 'done'"),
        (
            ["worker", "q", "--processor", "m:f", "--concurrency", "0"],
            "must be an integer >= 1",
        ),
        (
            ["worker", "q", "--processor", "m:f", "--drain-delay", "0"],
            "must be a number of seconds > 0",
        ),
        (
            ["worker", "q", "--processor", "m:f", "--drain-delay", "nan"],
            "must be a number of seconds > 0",
        ),
        (["add", "q", "n", "--delay", "soon"], "invalid int value: 'soon'"),
        (["frobnicate", "q"], "invalid choice: 'frobnicate'"),
        ([], "the following arguments are required: COMMAND"),
    ],
)
def test_bad_arguments_are_one_error_line(
    redis_url: str, args: list[str], message: str
) -> None:
    """Argument mistakes are reported like every other error."""
    assert_error(cli(redis_url, *args), message)


def test_a_bad_redis_url_is_one_error_line() -> None:
    """A URL with an unknown scheme is refused before connecting."""
    assert_error(cli("http://127.0.0.1:1/0", "counts", "q"), "redis://")
