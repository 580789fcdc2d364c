"""What an op yields: the Redis requests of the op vocabulary, and `Op`.

An op is a generator that yields `Cmd`, `Eval`, `Atomic`, `EveryPrimary` or
a list of `Cmd` and `Eval` (one pipeline) and receives their replies;
`queues.drive` sends them. `Op[T]` is an op that returns a `T` (plain `Op`:
any result).
"""

from __future__ import annotations

import time
from collections.abc import Generator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar, Union

if TYPE_CHECKING:  # a default (PEP 696) lets a plain `Op` mean `Op[Any]`
    import typing_extensions

    T = typing_extensions.TypeVar("T", default=Any)
else:
    T = TypeVar("T")


class Cmd(NamedTuple):
    """A plain Redis command."""

    args: tuple[Any, ...]


class Eval(NamedTuple):
    """A call of one of the registered Lua scripts."""

    name: str
    keys: Sequence[str]
    args: Sequence[Any]


class Atomic(NamedTuple):
    """Requests sent as one MULTI/EXEC transaction (a flow insert)."""

    requests: list[Cmd | Eval]


class EveryPrimary(NamedTuple):
    """A server-wide command (CLIENT LIST) asked of every primary of a Redis
    Cluster, whose connections differ per node; the reply is the list of
    their replies (one item from a single server). Never in a pipeline."""

    args: tuple[Any, ...]


Request = Union[Cmd, Eval, Atomic, EveryPrimary, list[Cmd | Eval]]
Op = Generator[Request, Any, T]


def now_ms() -> int:
    """Wall-clock time in ms since the epoch."""
    return int(time.time() * 1000)
