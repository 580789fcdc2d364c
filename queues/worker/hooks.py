"""Worker-local event hooks: BullMQ's `worker.on(...)` in Python.

Listeners run in the worker process, on its event loop: a plain function is
called there (keep it quick: the loop also renews locks), an `async def` is
started as a task and awaited (with a bound) before `run()` returns. A
listener that raises is logged; it never fails a job or stops the worker.

Events and the arguments listeners get:

- `active(job)`: the worker started the job.
- `progress(job, progress)`: the job reported progress (once it is written).
- `completed(job, result)`: the job's completion is saved.
- `failed(job, error)`: an attempt failed; the retry, or the final failure,
  is saved (`job.attempts_made` counts this attempt, as BullMQ's does).
- `stalled(job_id)`: this worker's stalled check moved the job back to wait.
- `drained()`: the queue had no job to claim (once until a job comes).
- `error(error)`: a worker error not tied to a job (Redis unreachable, a
  lock renewal or stalled check that failed).
- `closing()`: `close()` was called (once): the worker claims no more jobs.
- `closed()`: `run()` is about to return.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable
from typing import Any

from .support import log

EVENTS = (
    "active",
    "progress",
    "completed",
    "failed",
    "stalled",
    "drained",
    "error",
    "closing",
    "closed",
)
Listener = Callable[..., Any]


class WorkerHooks:
    """The listeners of one worker's events, and their running async calls."""

    def __init__(self, worker_name: str) -> None:
        self.worker_name = worker_name
        self._listeners: dict[str, list[Listener]] = {e: [] for e in EVENTS}
        self._tasks: set[asyncio.Future[Any]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None

    def on(self, event: str, listener: Listener | None = None) -> Any:
        """Call `listener` on `event`; without a listener, a decorator."""
        if event not in self._listeners:
            raise ValueError(f"unknown worker event {event!r}; one of {EVENTS}")
        if listener is None:
            return lambda fn: self.on(event, fn)
        if not callable(listener):
            raise TypeError("a worker event listener must be callable")
        self._listeners[event].append(listener)
        return listener

    def off(self, event: str, listener: Listener) -> None:
        """Stop calling `listener` on `event` (no error if it was not there)."""
        listeners = self._listeners.get(event, [])
        if listener in listeners:
            listeners.remove(listener)

    def listened(self, event: str) -> bool:
        """Whether `event` has listeners (so callers can skip building args)."""
        return bool(self._listeners[event])

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """The loop listeners run on (the worker's, set by run())."""
        self._loop = loop
        self._loop_thread = threading.get_ident()

    def emit(self, event: str, *args: Any) -> None:
        """Call the listeners of `event`; from another thread, on the loop."""
        listeners = self._listeners[event]
        if not listeners:
            return
        loop = self._loop
        if loop is not None and threading.get_ident() != self._loop_thread:
            try:
                loop.call_soon_threadsafe(self.emit, event, *args)
            except RuntimeError:  # the loop is closed: nobody listens any more
                pass
            return
        for listener in list(listeners):
            try:
                result = listener(*args)
                if inspect.isawaitable(result):
                    task = asyncio.ensure_future(result)
                    self._tasks.add(task)
                    task.add_done_callback(self._task_done(event, listener))
            except Exception:  # noqa: BLE001 - a listener never breaks the worker
                self._log_failure(event, listener)

    def _task_done(
        self, event: str, listener: Listener
    ) -> Callable[[asyncio.Future[Any]], None]:
        def done(task: asyncio.Future[Any]) -> None:
            self._tasks.discard(task)
            if task.cancelled():
                return
            exc = task.exception()
            if exc is not None:
                self._log_failure(event, listener, exc)

        return done

    def _log_failure(
        self, event: str, listener: Listener, exc: BaseException | None = None
    ) -> None:
        log.error(
            "worker %s: %r listener %s raised",
            self.worker_name,
            event,
            getattr(listener, "__qualname__", repr(listener)),
            exc_info=exc or True,
        )

    async def wait(self, timeout: float) -> None:
        """Let running async listeners finish, up to `timeout` seconds."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout)
