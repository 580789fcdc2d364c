"""Who drives an op: the `Driver` protocol, and `op_method`, which turns a
method that builds an op into one that runs it on its object's driver.

`Queue` is a sync driver (its methods return values), `AsyncQueue` an async
one (its methods return awaitables), and a `Job` drives its ops on the
queue that read it. Each method is written once, as an op; `op_method`
gives it the precise return type of each flavour: `T` on a `Queue` (or a
job of one), `Awaitable[T]` on an `AsyncQueue` (or a job of one).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import (
    Any,
    Concatenate,
    Generic,
    ParamSpec,
    Protocol,
    TypeVar,
    cast,
    overload,
)

from .keys import QueueKeys
from .ops import Op

T = TypeVar("T")
S = TypeVar("S")
P = ParamSpec("P")


class Driver(Protocol):
    """Runs ops on one queue's Redis: `drive(op)` returns the op's result
    (sync) or an awaitable of it (asyncio)."""

    @property
    def keys(self) -> QueueKeys:
        """The keys of the queue the ops act on."""

    def drive(self, op: Op[T]) -> Any:
        """Run `op` to its end."""


class SyncDriver(Driver, Protocol):
    """A Driver whose `drive` returns the op's result."""

    def drive(self, op: Op[T]) -> T:
        """Run `op` to its end; its result."""


class AsyncDriver(Driver, Protocol):
    """A Driver whose `drive` returns an awaitable of the op's result."""

    def drive(self, op: Op[T]) -> Awaitable[T]:
        """Run `op` to its end; an awaitable of its result."""


class _DrivenBySync(Protocol):
    @property
    def driver(self) -> SyncDriver: ...


class _DrivenByAsync(Protocol):
    @property
    def driver(self) -> AsyncDriver: ...


class op_method(Generic[S, P, T]):  # noqa: N801 - used as a decorator
    """Decorates a method that returns an `Op[T]`: called on an object, it
    runs that op on the object's `driver` (T, or Awaitable[T])."""

    def __init__(self, build: Callable[Concatenate[S, P], Op[T]]) -> None:
        self.build = build
        functools.update_wrapper(cast(Any, self), build)

    def __call__(self, obj: S, /, *args: P.args, **kwargs: P.kwargs) -> Any:
        """Called on the class (`Queue.add(queue, ...)`): as on `obj`."""
        return cast(Any, obj).driver.drive(self.build(obj, *args, **kwargs))

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> op_method[S, P, T]: ...

    @overload
    def __get__(self, obj: _DrivenBySync, owner: type[Any]) -> Callable[P, T]: ...

    @overload
    def __get__(
        self, obj: _DrivenByAsync, owner: type[Any]
    ) -> Callable[P, Awaitable[T]]: ...

    def __get__(self, obj: Any, owner: type[Any]) -> Any:
        if obj is None:
            return self
        build = self.build
        drive = obj.driver.drive

        def run(*args: P.args, **kwargs: P.kwargs) -> Any:
            return drive(build(obj, *args, **kwargs))

        return run
