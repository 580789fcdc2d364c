"""Job handlers: a registry from job names to functions, with the VRAM each
declares, and the context a handler runs with.

    from gpu_workers.handlers import handler

    @handler("txt2img", vram="10GiB")             # or vram=lambda data: ...
    def txt2img(ctx):                              # plain def: runs in a thread
        for step in range(30):
            if ctx.should_stop():                  # an operator cancelled it
                return None
            ...
            ctx.report_progress(100 * (step + 1) // 30)
        return {"ok": True}

Modules holding handlers are named in settings (BULLPEN_HANDLER_MODULES) and
imported by each worker process; `async def` handlers run on the worker's
event loop and may `await ctx.report_progress(...)`.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from queues import Job, UnrecoverableError
from queues.outages import recoverable

from . import defaults
from .device import Device
from .exceptions import ConfigError, HandlerNotFound, UnitError
from .models import MODELS, ModelRegistry, ModelSpec, model_of
from .units import format_bytes, parse_bytes

log = logging.getLogger("gpu_workers.handlers")

VramSpec = int | str | Callable[[Any], int | str]


@dataclass(frozen=True)
class Handler:
    """A registered handler: its job name, function and declared VRAM (with
    a model: the per-job working memory beside the model's weights)."""

    name: str
    fn: Callable[[JobContext], Any]
    vram: VramSpec = 0
    #: The model its jobs use (models.py): a name, from_data(key), a callable.
    model: ModelSpec = None

    @property
    def is_async(self) -> bool:
        """Whether it runs on the event loop (else in a thread)."""
        return inspect.iscoroutinefunction(self.fn)

    def declared_bytes(self, data: Any) -> int:
        """The VRAM this job needs, from the constant or the function of its data."""
        try:
            value = self.vram(data) if callable(self.vram) else self.vram
            return parse_bytes(value)
        except (UnitError, TypeError, ValueError, KeyError, AttributeError) as exc:
            raise UnrecoverableError(
                f"cannot work out the VRAM need of a {self.name!r} job: {exc}"
            ) from exc


class HandlerRegistry:
    """Job name -> Handler."""

    def __init__(self, models: ModelRegistry = MODELS) -> None:
        self._handlers: dict[str, Handler] = {}
        #: The models its handlers name.
        self.models = models

    def register(
        self,
        name: str,
        fn: Callable[[JobContext], Any],
        vram: VramSpec = 0,
        model: ModelSpec = None,
    ) -> Handler:
        """Add a handler; a name taken by another function is a ConfigError."""
        if not isinstance(name, str) or not name:
            raise ConfigError("a handler needs a non-empty job name")
        if not callable(fn):
            raise ConfigError(f"handler {name!r} is not callable")
        if not callable(vram):
            parse_bytes(vram)
        old = self._handlers.get(name)
        if old is not None and _qualname(old.fn) != _qualname(fn):
            raise ConfigError(
                f"job name {name!r} already has handler "
                f"{_qualname(old.fn)}; cannot also register {_qualname(fn)}"
            )
        if model is not None and not callable(model) and not isinstance(model, str):
            raise ConfigError(f"handler {name!r}: model must be a name or callable")
        entry = Handler(name, fn, vram, model)
        self._handlers[name] = entry
        return entry

    def handler(
        self, name: str, vram: VramSpec = 0, model: ModelSpec = None
    ) -> Callable[[Callable[[JobContext], Any]], Callable[[JobContext], Any]]:
        """Decorator form of register()."""

        def decorate(fn: Callable[[JobContext], Any]) -> Callable[[JobContext], Any]:
            self.register(name, fn, vram, model)
            return fn

        return decorate

    def model_of(self, entry: Handler, data: Any) -> str | None:
        """The model a job of `entry` uses (UnrecoverableError when bad)."""
        return model_of(entry.model, data, self.models)

    def model_for(self, name: str, data: Any) -> str | None:
        """The model a job would use, never raising: None for an unknown job
        name, a handler without a model, or data naming no valid model."""
        entry = self._handlers.get(name)
        if entry is None or entry.model is None:
            return None
        try:
            return model_of(entry.model, data, self.models)
        except Exception:  # noqa: BLE001 - placement only prefers; the run decides
            return None

    def uses_models(self) -> bool:
        """Whether any handler declares a model (placement is then worth it)."""
        return any(h.model is not None for h in self._handlers.values())

    def get(self, name: str) -> Handler:
        """The handler of a job name, or HandlerNotFound (fails the job at once)."""
        try:
            return self._handlers[name]
        except KeyError:
            known = ", ".join(sorted(self._handlers)) or "none"
            raise HandlerNotFound(
                f"no handler for job name {name!r} (registered: {known})"
            ) from None

    def names(self) -> list[str]:
        """Registered job names."""
        return sorted(self._handlers)


def _qualname(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


#: The registry that `@handler` fills and worker processes read.
REGISTRY = HandlerRegistry()
handler = REGISTRY.handler


def bounded(data: Any, key: str, default: float, high: float) -> float:
    """A number from job data within 0..high, else UnrecoverableError (job
    data is untrusted: it must not set how long a GPU is held)."""
    value = (data or {}).get(key, default)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise UnrecoverableError(f"{key} must be a number, not {value!r}") from None
    if not 0 <= number <= high:
        raise UnrecoverableError(f"{key} is {value!r}; expected 0..{high:g}")
    return number


def load_handler_modules(modules: Iterable[str]) -> None:
    """Import each module so its `@handler`s register (ConfigError if one fails)."""
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:
            raise ConfigError(
                f"cannot import handler module {name!r}: {exc!r}"
            ) from exc


@dataclass
class JobMeter:
    """What a worker knows about one claimed job while it runs."""

    job_id: str
    name: str
    declared_bytes: int = 0
    #: The model it runs on (None: it declares none).
    model: str | None = None
    admitted: bool = False
    claimed_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    started_ms: int | None = None
    #: Wall-clock microseconds of admission and release (for overlap checks).
    admitted_us: int | None = None
    released_us: int | None = None
    progress: Any = 0
    #: Peak the handler reported (record_peak), e.g. from its own tensors.
    handler_peak_bytes: int | None = None
    #: Peak of simulated memory this job held.
    sim_peak_bytes: int | None = None
    sim_held_bytes: int = 0
    #: Peak of the whole process on the GPU while this job ran (NVML by pid).
    process_peak_bytes: int | None = None
    cancel: threading.Event = field(default_factory=threading.Event)

    def best_peak(self) -> tuple[int | None, str | None]:
        """The best per-job peak and where it came from."""
        if self.handler_peak_bytes is not None:
            return self.handler_peak_bytes, "handler"
        if self.sim_peak_bytes is not None:
            return self.sim_peak_bytes, "simulated"
        if self.process_peak_bytes is not None:
            return self.process_peak_bytes, "nvml-process"
        return None, None

    def summary(self) -> dict[str, Any]:
        """The job as a heartbeat lists it."""
        return {
            "id": self.job_id,
            "name": self.name,
            "declared_bytes": self.declared_bytes,
            "model": self.model,
            "working_bytes": self.declared_bytes if self.model else None,
            "admitted": self.admitted,
            "state": "running" if self.admitted else "waiting-for-vram",
            "progress": self.progress,
            "claimed_ms": self.claimed_ms,
            "started_ms": self.started_ms,
        }


class JobContext:
    """What a handler receives: the job, its device, progress, log, cancel."""

    def __init__(
        self, job: Job, device: Device, meter: JobMeter, loop: asyncio.AbstractEventLoop
    ) -> None:
        self.job = job
        self.device = device
        self.meter = meter
        self._loop = loop
        #: The job's resident model (what its load returned), or None.
        self.model: Any = None

    @property
    def declared_bytes(self) -> int:
        """The VRAM this job was admitted with."""
        return self.meter.declared_bytes

    @property
    def data(self) -> Any:
        """The job's data."""
        return self.job.data

    def should_stop(self) -> bool:
        """True once an operator asked to cancel this job: return soon."""
        return self.meter.cancel.is_set()

    def report_progress(self, value: Any) -> Awaitable[Any] | None:
        """Store progress (a number or a JSON object). From a thread it waits for
        the write; on the event loop it returns a task you may await."""
        self.meter.progress = value
        return self._call(
            self._best_effort(lambda: self.job.update_progress(value), "progress")
        )

    def log(self, line: str) -> Awaitable[Any] | None:
        """Append a line to the job's log (same calling rules as report_progress)."""
        return self._call(self._best_effort(lambda: self.job.log(str(line)), "log"))

    def record_peak(self, nbytes: int) -> None:
        """Report this job's own measured peak VRAM (e.g. from its tensors)."""
        current = self.meter.handler_peak_bytes or 0
        self.meter.handler_peak_bytes = max(current, int(nbytes))

    def allocation(self, value: Any) -> int:
        """Bytes a handler may hold, from job data: never above the declared
        need it was admitted with (the admission is what keeps GPUs from OOM)."""
        try:
            nbytes = parse_bytes(value)
        except (UnitError, TypeError, ValueError) as exc:
            raise UnrecoverableError(f"bad allocation {value!r}: {exc}") from exc
        if nbytes > self.declared_bytes:
            raise UnrecoverableError(
                f"job asks to allocate {format_bytes(nbytes)} ({nbytes} bytes), "
                f"above its declared {format_bytes(self.declared_bytes)} "
                f"({self.declared_bytes} bytes): declare what it uses"
            )
        return nbytes

    def sim_allocate(self, nbytes: int) -> None:
        """Hold simulated VRAM (SimulatedOutOfMemory past the device's capacity)."""
        if self.device.memory is not None:
            self.device.memory.allocate(nbytes, job=True)
        self.meter.sim_held_bytes += nbytes
        self.meter.sim_peak_bytes = max(
            self.meter.sim_peak_bytes or 0, self.meter.sim_held_bytes
        )

    def sim_free(self, nbytes: int | None = None) -> None:
        """Give simulated VRAM back (all this job holds by default)."""
        amount = (
            self.meter.sim_held_bytes
            if nbytes is None
            else min(nbytes, self.meter.sim_held_bytes)
        )
        if self.device.memory is not None:
            self.device.memory.free(amount, job=True)
        self.meter.sim_held_bytes -= amount

    async def _best_effort(self, write: Callable[[], Awaitable[Any]], what: str) -> Any:
        """Run a progress or log write; an error Redis may clear by itself
        (queues.outages: a connection failure, OOM at maxmemory, READONLY, ...)
        is retried once (a pooled connection left stale by a Redis restart
        fails on first use, the retry reconnects) and then skipped with a
        warning: a long GPU job must not fail because one progress update met a
        Redis blip."""
        for attempt in (1, 2):
            try:
                return await write()
            except Exception as exc:
                if not recoverable(exc):
                    raise
                if attempt == 2:
                    log.warning(
                        "job %s: %s write skipped, Redis: %s", self.job.id, what, exc
                    )
        return None

    def _call(self, coro: Any) -> Awaitable[Any] | None:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            return self._loop.create_task(coro)
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            future.result(defaults.PROGRESS_WRITE_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - progress must not fail the job
            log.warning("job %s: progress/log write failed: %r", self.job.id, exc)
        return None

    def __repr__(self) -> str:
        return (
            f"<JobContext job={self.job.id} name={self.job.name!r} "
            f"declared={format_bytes(self.declared_bytes)} gpu={self.device.uuid}>"
        )
