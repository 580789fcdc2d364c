"""`python -m queues`: run a worker, add jobs and inspect or act on a queue.

Every error a user can cause (a bad processor path, an unknown queue, bad JSON
or job options, an unreachable Redis, a bad argument) ends the command with
one `error: ...` line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, NoReturn
from urllib.parse import urlsplit

import redis
import redis.sentinel

from . import cli_groups, codec, defaults, functionlibs
from .cluster import is_cluster_client
from .connection import DEFAULT_URL, sync_from_url
from .exceptions import QueueError
from .job import Job
from .keys import SUFFIXES
from .queue import Queue
from .state import JobState, parse_state
from .worker import Processor, Worker

log = logging.getLogger("queues.cli")

DESCRIPTION = "Run a worker, add jobs, and inspect or act on a BullMQ-compatible queue."
EXIT_ERROR = 2
# Short, so a wrong host or port fails in seconds instead of hanging.
CONNECT_TIMEOUT_S = 3.0
CELL_WIDTH = 60
PAGE_SIZE = 50
STATES = ["wait", *(s.value for s in JobState if s is not JobState.UNKNOWN)]
CLEANABLE = [s for s in STATES if s != JobState.WAITING_CHILDREN.value]
URL_HELP = f"Redis URL (default: $REDIS_URL, else {DEFAULT_URL})"
BACKOFF_HELP = 'ms between attempts, or {"type": "exponential", "delay": MS}'
STATE_HELP = f"any of {', '.join(STATES[1:])} (default: all)"
END_HELP = f"last index, inclusive; -1: the last job (default: start + {PAGE_SIZE - 1})"
GRACE_HELP = "keep jobs younger than this (default: 0)"
PROC_HELP = "called with each Job; found from the current directory or PYTHONPATH"
#: Commands that may create the queue; all others need it to exist.
CREATING = frozenset({"add", "worker"})

Command = Callable[[Queue, argparse.Namespace], None]


class CliError(Exception):
    """Raised for a mistake in the command line; main() prints it as `error: ...`."""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one `error:` line like all others."""

    def error(self, message: str) -> NoReturn:
        """Print one line and exit 2."""
        self.exit(EXIT_ERROR, f"error: {message} (see {self.prog} --help)\n")


# --- loading the processor -------------------------------------------------
def load_processor(path: str) -> Processor:
    """Import `package.module:function` (the attribute may be dotted) and check it."""
    module_name, sep, attr = path.partition(":")
    names = module_name.split(".") + attr.split(".")
    if not sep or not all(name.isidentifier() for name in names):
        raise CliError(
            f"bad processor path {path!r}: expected 'package.module:function'"
        )
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise CliError(
            f"cannot import processor module {module_name!r}: {exc}"
        ) from exc
    except Exception as exc:  # noqa: BLE001 - any error in user code at import
        raise CliError(
            f"importing processor module {module_name!r} failed: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    for name in attr.split("."):
        if not hasattr(target, name):
            raise CliError(
                f"processor module {module_name!r} has no attribute {attr!r}"
            )
        target = getattr(target, name)
    if not callable(target):
        raise CliError(
            f"processor {path!r} is not callable (its type is {type(target).__name__})"
        )
    processor: Processor = target
    return processor


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _json_option(option: str, text: str) -> Any:
    try:
        return codec.loads(text)
    except codec.JSONDecodeError as exc:
        raise CliError(f"{option} is not valid JSON: {exc}") from exc


def _cell(text: str) -> str:
    text = text.replace("\n", "\\n")
    return text if len(text) <= CELL_WIDTH else text[: CELL_WIDTH - 3] + "..."


def _print_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=True)]
        print("  ".join(cells).rstrip())


def cmd_worker(queue: Queue, args: argparse.Namespace) -> None:
    """Process jobs until SIGTERM/SIGINT, then let running jobs finish."""
    # The URL, not this command's client: the worker makes its own clients
    # (no read timeout, pools sized to its concurrency, claims never re-sent).
    worker = Worker(
        queue.name,
        args.loaded_processor,
        connection=args.redis,
        prefix=queue.prefix,
        concurrency=args.concurrency,
        worker_name=args.name,
        lock_duration=args.lock_duration,
        stalled_interval=args.stalled_interval,
        drain_delay=args.drain_delay,
    )
    log.info("worker on %s started: %s", queue.name, args.processor)
    worker.run()
    done, failed = worker.processed, worker.failed
    log.info("worker stopped: %d jobs completed, %d attempts failed", done, failed)
    if worker.abandoned:
        # A job outlived close_timeout; a plain def one would keep its thread
        # (and the process) alive. Its lock expires and the stalled check
        # requeues the job.
        log.warning(
            "%d job(s) still running after the close timeout; exiting anyway",
            worker.abandoned,
        )
        logging.shutdown()
        os._exit(0)


def cmd_add(queue: Queue, args: argparse.Namespace) -> None:
    """Add one job and print its id."""
    data = None if args.data is None else _json_option("--data", args.data)
    backoff = None if args.backoff is None else _json_option("--backoff", args.backoff)
    keys = ("priority", "delay", "attempts", "lifo", "group")
    options = {k: getattr(args, k) for k in keys if getattr(args, k) is not None}
    print(queue.add(args.name, data, backoff=backoff, job_id=args.job_id, **options).id)


def cmd_counts(queue: Queue, args: argparse.Namespace) -> None:
    """Print the number of jobs in each state."""
    counts: dict[str, int] = queue.get_counts()
    if args.json:
        print(codec.dumps(counts))
        return
    _print_table(["STATE", "COUNT"], [[s, str(n)] for s, n in counts.items()])
    if queue.is_paused():
        print(f"queue {queue.name} is paused")


def _row(job: Job, state: JobState) -> list[str]:
    if state is JobState.FAILED:
        outcome = job.failed_reason or ""
    else:
        outcome = codec.dumps(job.returnvalue) if state is JobState.COMPLETED else ""
    attempts = f"{job.attempts_made}/{job.attempts}"
    data = codec.dumps(job.data)
    return [job.id, _cell(job.name), state.value, attempts, _cell(data), _cell(outcome)]


def cmd_jobs(queue: Queue, args: argparse.Namespace) -> None:
    """Print one page of jobs, newest first unless --asc."""
    end = args.start + PAGE_SIZE - 1 if args.end is None else args.end
    pairs = queue.get_jobs_with_states(args.state or [], args.start, end, args.asc)
    if args.json:
        print(codec.dumps([{**job.to_dict(), "state": st.value} for job, st in pairs]))
    elif pairs:
        header = ["ID", "NAME", "STATE", "ATTEMPTS", "DATA", "RESULT"]
        _print_table(header, [_row(job, state) for job, state in pairs])


def cmd_retry(queue: Queue, args: argparse.Namespace) -> None:
    """Move every failed (or completed) job back to wait."""
    state = parse_state(args.state)
    now = int(time.time() * 1000)
    count = int(queue.client.zcount(queue.keys.state(state), 0, now))
    queue.retry_jobs(state.value, timestamp=now)
    print(f"retried {count} {state.value} jobs")


def cmd_clean(queue: Queue, args: argparse.Namespace) -> None:
    """Delete jobs of one state older than the grace period."""
    removed: list[str] = queue.clean(args.grace, args.limit, args.state)
    print(f"removed {len(removed)} {parse_state(args.state).value} jobs")


def cmd_functions(client: Any, args: argparse.Namespace) -> None:
    """List Bullpen's function libraries in this Redis (current: this version
    sends them); --prune deletes the others (a Bullpen of another version
    still running loads its own again on its next call)."""
    if is_cluster_client(client):
        print("none: on a Redis Cluster Bullpen sends EVALSHA, never FCALL")
        return
    try:
        found = functionlibs.libraries(client)
        deleted = functionlibs.prune(client, found) if args.prune else []
    except redis.exceptions.NoPermissionError as exc:
        raise CliError(
            f"this Redis user may not run FUNCTION (its ACL): {exc}; "
            "Bullpen sends EVALSHA where FCALL is refused"
        ) from exc
    except redis.exceptions.ResponseError as exc:
        if "unknown command" in str(exc).lower():
            raise CliError(
                "this Redis has no functions (7.0+): Bullpen sends EVALSHA here"
            ) from exc
        raise
    if args.json:
        rows = [{"name": lib.name, "current": lib.current} for lib in found]
        print(codec.dumps({"libraries": rows, "deleted": deleted}))
        return
    for lib in found:
        state = (
            "current" if lib.current else "deleted" if lib.name in deleted else "old"
        )
        print(f"{lib.name}  {state}")
    old = sum(not lib.current for lib in found)
    print(
        f"{len(found)} libraries: {len(found) - old} current, {old} old"
        + (f", {len(deleted)} deleted" if args.prune else "")
    )


def cmd_pause(queue: Queue, args: argparse.Namespace) -> None:
    """Stop workers from taking jobs."""
    queue.pause()
    print(f"paused {queue.name}")


def cmd_resume(queue: Queue, args: argparse.Namespace) -> None:
    """Let workers take jobs again."""
    queue.resume()
    print(f"resumed {queue.name}")


# --- the parser ----------------------------------------------------------------
def _at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer >= minimum."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}")
        return value

    return parse


def _seconds(text: str) -> float:
    """An argparse type: a number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid seconds: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError("must be a number of seconds > 0")
    return value


def build_parser(redis_default: str = DEFAULT_URL) -> argparse.ArgumentParser:
    """The parser of every command; global options go before or after the command."""
    parser = _Parser(prog="python -m queues", description=DESCRIPTION)
    parser.add_argument("--redis", metavar="URL", default=redis_default, help=URL_HELP)
    parser.add_argument("--prefix", default=defaults.PREFIX, help="key prefix (bull)")
    common = _Parser(add_help=False)
    common.add_argument(
        "--redis", metavar="URL", default=argparse.SUPPRESS, help=URL_HELP
    )
    common.add_argument("--prefix", default=argparse.SUPPRESS, help="key prefix")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(func: Command) -> argparse.ArgumentParser:
        name = func.__name__.removeprefix("cmd_").replace("_", "-")
        doc = func.__doc__
        p = sub.add_parser(name, parents=[common], help=doc, description=doc)
        p.add_argument("queue", metavar="QUEUE")
        p.set_defaults(func=func)
        return p

    positive, count, dflt = _at_least(1), _at_least(0), "(default: %(default)s)"
    p = command(cmd_worker)
    p.add_argument(
        "--processor", required=True, metavar="MODULE:FUNCTION", help=PROC_HELP
    )
    p.add_argument("--concurrency", type=positive, default=1, metavar="N", help=dflt)
    p.add_argument("--name", metavar="WORKER_NAME", help="shown in the worker list")
    lock_ms, stalled_ms = defaults.LOCK_DURATION_MS, defaults.STALLED_INTERVAL_MS
    p.add_argument("--lock-duration", type=positive, default=lock_ms, metavar="MS")
    p.add_argument(
        "--stalled-interval", type=positive, default=stalled_ms, metavar="MS"
    )
    p.add_argument(
        "--drain-delay",
        type=_seconds,
        default=defaults.DRAIN_DELAY_S,
        metavar="S",
        help="longest wait for a job on an empty queue " + dflt,
    )
    p = command(cmd_add)
    p.add_argument("name", metavar="NAME")
    p.add_argument("--data", metavar="JSON", help="the job's data (default: {})")
    p.add_argument(
        "--priority", type=int, metavar="N", help="lower runs first; 0: none"
    )
    p.add_argument("--delay", type=int, metavar="MS")
    p.add_argument("--attempts", type=int, metavar="N")
    p.add_argument("--backoff", metavar="JSON|MS", help=BACKOFF_HELP)
    p.add_argument("--job-id", metavar="ID")
    p.add_argument("--lifo", action="store_true", default=None)
    p.add_argument("--group", metavar="ID", help="the job's group (fair turns)")
    p = command(cmd_counts)
    p.add_argument("--json", action="store_true")
    p = command(cmd_jobs)
    p.add_argument("--state", nargs="+", choices=STATES, metavar="S", help=STATE_HELP)
    p.add_argument("--start", type=int, default=0, metavar="N", help=dflt)
    p.add_argument("--end", type=int, metavar="N", help=END_HELP)
    p.add_argument("--asc", action="store_true", help="oldest first")
    p.add_argument("--json", action="store_true")
    p = command(cmd_retry)
    p.add_argument("--state", choices=["failed", "completed"], default="failed")
    p = command(cmd_clean)
    p.add_argument("--state", required=True, choices=CLEANABLE)
    p.add_argument("--grace", type=count, default=0, metavar="MS", help=GRACE_HELP)
    p.add_argument("--limit", type=count, default=0, metavar="N", help="0: no limit")
    command(cmd_pause)
    command(cmd_resume)
    cli_groups.add_commands(command, positive, count)
    doc = cmd_functions.__doc__ or ""
    p = sub.add_parser(
        "functions", parents=[common], help=doc.split(" (")[0], description=doc
    )
    p.add_argument("--prune", action="store_true", help="delete the old libraries")
    p.add_argument("--json", action="store_true")
    return parser


# --- running -------------------------------------------------------------------
def _known(queue: Queue) -> bool:
    """A queue exists when any of its queue-level keys (meta, id, events...) does."""
    keys = [getattr(queue.keys, suffix.replace("-", "_")) for suffix in SUFFIXES]
    return bool(queue.client.exists(*keys))


def _redacted(url: str) -> str:
    """The URL without its password, for error messages."""
    parts = urlsplit(url)
    if not parts.password:
        return url
    host = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=f"{parts.username or ''}:***@{host}").geturl()


def run(args: argparse.Namespace) -> int:
    """Connect, check the queue and run the parsed command."""
    if args.command == "worker":
        args.loaded_processor = load_processor(args.processor)
    client = sync_from_url(
        args.redis, decode_responses=True, socket_connect_timeout=CONNECT_TIMEOUT_S
    )
    try:
        client.ping()
        if args.command == "functions":
            cmd_functions(client, args)
            return 0
        queue = Queue(args.queue, client, args.prefix)
        if args.command not in CREATING and not _known(queue):
            raise CliError(
                f"unknown queue {args.queue!r}: no keys under "
                f"'{queue.keys.base}' (prefix {args.prefix!r})"
            )
        args.func(queue, args)
        return 0
    finally:
        client.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and run it; returns the exit status."""
    args = build_parser(os.environ.get("REDIS_URL", DEFAULT_URL)).parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return run(args)
    except redis.sentinel.MasterNotFoundError:
        message = (
            f"cannot reach Redis at {_redacted(args.redis)}: no sentinel named "
            "its primary (are they up, and is the master name right?)"
        )
    except (
        redis.exceptions.ConnectionError,
        redis.exceptions.TimeoutError,
        # Not a RedisError: a cluster client made with no node reachable.
        redis.exceptions.RedisClusterException,
    ) as exc:
        message = f"cannot reach Redis at {_redacted(args.redis)}: {exc}"
    except redis.exceptions.RedisError as exc:
        message = f"Redis error: {exc}"
    except (CliError, QueueError, ValueError) as exc:
        message = str(exc)
    except KeyboardInterrupt:
        return 130
    print(f"error: {_one_line(message)}", file=sys.stderr)
    return EXIT_ERROR


def worker_main(argv: Sequence[str] | None = None) -> int:
    """`bullpen-worker ARGS`: the same as `python -m queues worker ARGS`."""
    # `python -m` finds the processor's module from the current directory; a
    # console script's path starts at its own bin directory instead.
    sys.path.insert(0, os.getcwd())
    return main(["worker", *(sys.argv[1:] if argv is None else argv)])
