"""The groups commands of `python -m queues` (docs/groups.md): `groups`
(the largest backlogs), `group` (one), `group-set`, `group-pause`,
`group-resume`. `queues.cli` registers them with `add_commands`."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from . import codec
from .group_types import GroupInfo
from .ops import now_ms
from .queue import Queue

Command = Callable[[Queue, argparse.Namespace], None]
#: The settings `group-set` takes, as `Queue.set_group` names them.
SETTINGS = ("weight", "concurrency", "rate_max", "rate_duration_ms")
CLEAR_HELP = "; 'none' clears it (the default applies)"


def _fields(info: GroupInfo) -> dict[str, Any]:
    """A GroupInfo as a dict, with its state in one word (GroupInfo.state)."""
    return {**dataclasses.asdict(info), "state": info.state(now_ms())}


def _show(value: Any) -> str:
    return "-" if value is None else str(value)


def _state(info: GroupInfo) -> str:
    state = info.state(now_ms())
    return f"held ({info.hold})" if state == "held" else state


def cmd_groups(queue: Queue, args: argparse.Namespace) -> None:
    """Print the groups with the largest backlogs."""
    if args.find is not None:
        if args.start:
            raise ValueError("--find lists the first --count matches: no --start")
        search = queue.find_groups(args.find, args.count)
        found, total = search.groups, search.matched
        footer = f"{total}{'' if search.complete else '+'} groups whose id holds "
        footer += repr(args.find)
        if not search.complete:
            footer += " (the search stopped part-way through the index)"
    else:
        found, total = queue.get_groups_and_count(
            start=args.start, end=args.start + args.count - 1
        )
        footer = f"{total} groups"
    if args.json:
        print(codec.dumps([_fields(info) for info in found]))
        return
    header = ["GROUP", "WAITING", "ACTIVE", "WEIGHT", "CONC", "RATE", "STATE"]
    rows = [
        [
            info.id,
            str(info.waiting),
            str(info.active),
            _show(info.weight),
            _show(info.concurrency),
            f"{info.rate_max}/{info.rate_duration_ms}ms" if info.rate_max else "-",
            _state(info),
        ]
        for info in found
    ]
    _table(header, rows)
    print(footer)


def _one(queue: Queue, group: str) -> GroupInfo:
    info = queue.get_group(group)
    if info is None:
        raise ValueError(f"queue {queue.name!r} has no group {group!r}")
    return info


def cmd_group(queue: Queue, args: argparse.Namespace) -> None:
    """Print one group's backlog, settings and state."""
    fields = _fields(_one(queue, args.group))
    if args.json:
        print(codec.dumps(fields))
        return
    for name, value in fields.items():
        shown = codec.dumps(value) if isinstance(value, (dict, list)) else _show(value)
        print(f"{name + ':':<18}{shown}")


def cmd_group_set(queue: Queue, args: argparse.Namespace) -> None:
    """Change a group's settings ('none' clears one)."""
    given = {k: getattr(args, k) for k in SETTINGS if getattr(args, k) is not _UNSET}
    if not given:
        raise ValueError(
            "group-set needs at least one of "
            + ", ".join("--" + k.replace("_", "-") for k in SETTINGS)
        )
    queue.set_group(args.group, **given)
    shown = ", ".join(f"{k}={_show(v)}" for k, v in given.items())
    print(f"group {args.group}: {shown}")


def cmd_group_pause(queue: Queue, args: argparse.Namespace) -> None:
    """Stop workers from taking one group's jobs (they wait; none is lost)."""
    queue.pause_group(args.group)
    print(f"paused group {args.group}")


def cmd_group_resume(queue: Queue, args: argparse.Namespace) -> None:
    """Let workers take one group's jobs again."""
    queue.resume_group(args.group)
    print(f"resumed group {args.group}")


_UNSET = object()


def _setting(minimum: int) -> Callable[[str], int | None]:
    """An argparse type: an integer >= minimum, or 'none' (clears)."""

    def parse(text: str) -> int | None:
        if text.lower() == "none":
            return None
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"invalid value: {text!r} (an integer or 'none')"
            ) from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}")
        return value

    return parse


def add_commands(
    command: Callable[[Command], argparse.ArgumentParser],
    positive: Callable[[str], int],
    count: Callable[[str], int],
) -> None:
    """Register the groups commands with the CLI's `command` helper."""
    p = command(cmd_groups)
    p.add_argument("--start", type=count, default=0, metavar="N", help="(default: 0)")
    p.add_argument(
        "--count", type=positive, default=20, metavar="N", help="(default: 20)"
    )
    p.add_argument(
        "--find",
        metavar="TEXT",
        help="only the groups whose id holds TEXT (largest backlog first)",
    )
    p.add_argument("--json", action="store_true")
    p = command(cmd_group)
    p.add_argument("group", metavar="GROUP")
    p.add_argument("--json", action="store_true")
    p = command(cmd_group_set)
    p.add_argument("group", metavar="GROUP")
    bounds = {"weight": 1, "concurrency": 0, "rate_max": 1, "rate_duration_ms": 1}
    helps = {
        "weight": "turns in a row (default 1)",
        "concurrency": "most active jobs at once, all workers (0: no limit)",
        "rate_max": "most jobs started per window",
        "rate_duration_ms": "the rate window, ms",
    }
    for name in SETTINGS:
        p.add_argument(
            "--" + name.replace("_", "-"),
            dest=name,
            type=_setting(bounds[name]),
            default=_UNSET,
            metavar="N",
            help=helps[name] + CLEAR_HELP,
        )
    for func in (cmd_group_pause, cmd_group_resume):
        command(func).add_argument("group", metavar="GROUP")


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
