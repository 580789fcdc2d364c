"""Models as a resource: weights loaded once on a GPU and kept across jobs.

    from gpu_workers.models import model, from_data
    from gpu_workers.handlers import handler

    @model("sdxl", weights="7GiB", load_seconds=20)   # weights=None: measured
    def load_sdxl(ctx):                               # ctx: a LoadContext
        return build_pipeline().to(ctx.device.torch_device)

    @handler("txt2img", vram="4GiB", model="sdxl")     # vram = working memory
    def txt2img(ctx):
        pipe = ctx.model                              # the resident object
        ...

    @handler("generate", vram="4GiB", model=from_data("model"))  # data["model"]

A model's `unload` (default: drop the reference, then torch's
`empty_cache()` where torch is imported) runs when admission evicts it;
the probe's measured memory then confirms what came back (residency.py).
Handlers that declare no model are admitted by their `vram` alone, as
before. Simulated GPUs simulate models (`sim_model`): weights held in the
process's simulated memory, a load that takes its time.
"""

from __future__ import annotations

import gc
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from queues import UnrecoverableError

from .device import Device
from .exceptions import ConfigError, UnitError
from .units import parse_bytes

#: Model names: what Redis keys, metrics labels and job data carry.
MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")
MODEL_NAME_RULE = (
    "1-64 letters, digits, '_', '.' or '-', starting with a letter or digit"
)


def check_model_name(value: Any) -> str:
    """A model name, or ConfigError naming the rule."""
    if not isinstance(value, str) or not MODEL_NAME.fullmatch(value):
        raise ConfigError(f"a model name must be {MODEL_NAME_RULE}, not {value!r}")
    return value


@dataclass
class LoadContext:
    """What a model's load function receives: the device it loads onto."""

    model: str
    device: Device

    def sim_allocate(self, nbytes: int) -> None:
        """Hold simulated VRAM for the weights (simulated devices only)."""
        if self.device.memory is not None:
            self.device.memory.allocate(nbytes)


@dataclass(frozen=True)
class Model:
    """A declared model: how to load and unload it, and its weights' VRAM."""

    name: str
    load: Callable[[LoadContext], Any]
    #: Bytes of resident weights; None = measured after the first load.
    weights: int | None = None
    #: Called with the loaded object on eviction (None: drop it, empty_cache).
    unload: Callable[[Any], None] | None = None
    #: Expected seconds to load before any load was measured.
    load_seconds: float | None = None
    #: Simulated weights (bytes held in simulated memory; sim_model).
    sim_bytes: int = 0

    def release(self, holder: list[Any]) -> None:
        """Run the unload on the object `holder` hands over (its caller keeps
        no other reference), drop it, then free what the allocator caches:
        torch gives a tensor's memory back to the driver only in
        empty_cache() and only once nothing references the tensor."""
        obj = holder.pop()
        if self.unload is not None:
            self.unload(obj)
        del obj
        free_cached_memory()


def free_cached_memory() -> None:
    """Collect garbage, then give torch's cached blocks back to the driver
    (where torch is imported), so the probe's reading shows them free."""
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


class ModelRegistry:
    """Model name -> Model."""

    def __init__(self) -> None:
        self._models: dict[str, Model] = {}

    def register(self, entry: Model) -> Model:
        """Add a model; a name taken by another load function is a ConfigError."""
        check_model_name(entry.name)
        if not callable(entry.load):
            raise ConfigError(f"model {entry.name!r}: load is not callable")
        if entry.weights is not None and entry.weights < 0:
            raise ConfigError(f"model {entry.name!r}: weights cannot be negative")
        old = self._models.get(entry.name)
        if old is not None and _qualname(old.load) != _qualname(entry.load):
            raise ConfigError(
                f"model {entry.name!r} is already declared by {_qualname(old.load)}"
            )
        self._models[entry.name] = entry
        return entry

    def model(
        self,
        name: str,
        weights: int | str | None = None,
        unload: Callable[[Any], None] | None = None,
        load_seconds: float | None = None,
    ) -> Callable[[Callable[[LoadContext], Any]], Callable[[LoadContext], Any]]:
        """Decorator: the function loads the model and returns it."""
        nbytes = None if weights is None else parse_bytes(weights)

        def decorate(fn: Callable[[LoadContext], Any]) -> Callable[[LoadContext], Any]:
            self.register(Model(name, fn, nbytes, unload, load_seconds))
            return fn

        return decorate

    def get(self, name: str) -> Model:
        """The model of a name, or UnrecoverableError naming the known ones."""
        try:
            return self._models[name]
        except (KeyError, TypeError):
            known = ", ".join(sorted(self._models)) or "none"
            raise UnrecoverableError(
                f"unknown model {name!r} (declared: {known})"
            ) from None

    def names(self) -> list[str]:
        """Declared model names."""
        return sorted(self._models)

    def __contains__(self, name: object) -> bool:
        return name in self._models


def _qualname(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


#: The registry `@model` fills and worker processes read.
MODELS = ModelRegistry()
model = MODELS.model

ModelSpec = str | Callable[[Any], Any] | None


class from_data:  # noqa: N801 - reads as a declaration: model=from_data("model")
    """A handler's model named by a key of its job data (`data["model"]`),
    optionally one of `allowed`; jobs without it use `default`."""

    def __init__(
        self, key: str, default: str | None = None, allowed: list[str] | None = None
    ) -> None:
        self.key = key
        self.default = default
        self.allowed = None if allowed is None else frozenset(allowed)

    def __call__(self, data: Any) -> Any:
        if not isinstance(data, dict):
            if self.default is None:
                raise UnrecoverableError(
                    f"job data must be an object naming its model in {self.key!r}"
                )
            return self.default
        value = data.get(self.key, self.default)
        if self.allowed is not None and value not in self.allowed:
            raise UnrecoverableError(
                f"{self.key} must be one of {sorted(self.allowed)}, not {value!r}"
            )
        return value

    def __repr__(self) -> str:
        return f"from_data({self.key!r})"


def model_of(spec: ModelSpec, data: Any, registry: ModelRegistry) -> str | None:
    """The model a job uses (None: it declares none), checked against the
    registry: a bad or unknown name fails the job (UnrecoverableError)."""
    if spec is None:
        return None
    try:
        name = spec(data) if callable(spec) else spec
    except UnrecoverableError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError, UnitError) as exc:
        raise UnrecoverableError(f"cannot work out the job's model: {exc}") from exc
    if name is None:
        return None
    if not isinstance(name, str) or not MODEL_NAME.fullmatch(name):
        raise UnrecoverableError(f"bad model name {name!r}: {MODEL_NAME_RULE}")
    registry.get(name)
    return name


#: Simulated load times are multiplied by this (bench/models.py scales down).
SIM_TIME_SCALE = {"factor": 1.0}


def sim_model(
    name: str,
    weights: int | str,
    load_s: float,
    registry: ModelRegistry = MODELS,
    fail: Callable[[], BaseException | None] | None = None,
) -> Model:
    """Declare a simulated model: loading holds `weights` of the device's
    simulated memory (a simulated OOM when it does not fit) and takes
    `load_s` x SIM_TIME_SCALE seconds; `fail()` may return an error to raise."""
    nbytes = parse_bytes(weights)

    def load(ctx: LoadContext) -> dict[str, Any]:
        if fail is not None and (err := fail()) is not None:
            raise err
        ctx.sim_allocate(nbytes)  # the weights arrive as the load goes
        time.sleep(max(load_s * SIM_TIME_SCALE["factor"], 0.0))
        return {"model": name, "sim_bytes": nbytes, "device": ctx.device}

    load.__qualname__ = f"sim_model.{name}"
    return registry.register(
        Model(name, load, nbytes, _sim_unload, load_s, sim_bytes=nbytes)
    )


def _sim_unload(obj: Any) -> None:
    device = obj.get("device")
    if device is not None and device.memory is not None:
        device.memory.free(obj["sim_bytes"])
