"""Placement's rules, pure: what a waiting job looks like to placement
(`Candidate`, read from peek_wait.lua's fields), what this GPU's residency
tells it (`LocalView`) and the choice (`choose`); placement.py reads Redis
and acts on the choice."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

#: Shortest and longest hold when no waiting job suits this GPU.
HOLD_MIN_S, HOLD_MAX_S = 0.05, 1.0


#: The job name and data -> its model (None: no model), never raising.
ModelFor = Callable[[str, Any], "str | None"]


class LocalView(Protocol):
    """What this GPU's residency tells placement (GpuWorker.residency)."""

    def resident(self) -> frozenset[str]:
        """Models resident or loading here."""
        ...

    def loadable_without_eviction(self, model: str) -> bool:
        """Whether `model` fits here now without evicting another."""
        ...

    def backing_off(self, model: str) -> bool:
        """Whether a load of `model` failed here and its backoff runs."""
        ...

    def wanted(self) -> frozenset[str]:
        """Models the warm pool or operators' pins want on this GPU."""
        ...

    def has_free_slot(self) -> bool:
        """Whether the worker may take another job now."""
        ...

    def expected_load_s(self, model: str) -> float:
        """Seconds a load of `model` takes here (past loads, else declared)."""
        ...


@dataclass(frozen=True)
class Candidate:
    """A waiting job as placement sees it."""

    job_id: str
    model: str | None
    #: When it became ready to run (timestamp + delay, ms); None: unknown,
    #: which counts as waited past every bound.
    ready_ms: int | None


@dataclass(frozen=True)
class Choice:
    """`job_id` to take (at `index` in claim order), or None: claim nothing
    for `hold_s` (0 with no job: nothing to choose, the plain claim)."""

    job_id: str | None
    hold_s: float
    reason: str
    index: int = -1


#: Where else a model is: OPEN (resident on another GPU serving this queue,
#: with a free slot there), WARM (resident there, every slot busy), or "".
OPEN, WARM = "open", "warm"


def choose(
    candidates: Sequence[Candidate],
    view: LocalView,
    elsewhere: Callable[[str], str],
    now_ms: int,
    age_bound_ms: int,
    cold_hold_ms: int,
) -> Choice:
    """The first candidate that suits this GPU (the module's rules), else a
    hold until the earliest candidate's next threshold (50 ms..1 s). A job
    whose model is warm on a busy GPU is left to it until it has waited as
    long as loading the model here would take (and the cold hold): waiting
    for a warm slot up to a load time costs the job no more than a load, and
    saves the GPU-time and the eviction."""
    if not candidates:
        return Choice(None, 0.0, "nothing waiting")
    resident, wanted = view.resident(), view.wanted()
    next_ms = math.inf
    skipped: dict[str, int] = {}
    for i, c in enumerate(candidates):
        age = math.inf if c.ready_ms is None else max(now_ms - c.ready_ms, 0)
        model = c.model
        why = ""
        if model is None:
            why = "no model"
        elif model in resident:
            why = f"{model} resident here"
        elif age >= age_bound_ms:
            why = f"waited past the age bound ({model})"
        elif view.backing_off(model):
            next_ms = min(next_ms, age_bound_ms - age)
            skipped["backing off"] = skipped.get("backing off", 0) + 1
            continue
        elif (where := elsewhere(model)) == OPEN:
            next_ms = min(next_ms, age_bound_ms - age)
            skipped["open elsewhere"] = skipped.get("open elsewhere", 0) + 1
            continue
        elif model in wanted:
            why = f"{model} wanted here"
        elif where == WARM and age < (
            wait := max(cold_hold_ms, 1000 * view.expected_load_s(model))
        ):
            next_ms = min(next_ms, wait - age, age_bound_ms - age)
            skipped["warm elsewhere"] = skipped.get("warm elsewhere", 0) + 1
            continue
        elif where == WARM:
            why = f"waited a load time for a warm GPU ({model})"
        elif view.loadable_without_eviction(model):
            why = f"{model} loads without eviction"
        elif age >= cold_hold_ms:
            why = f"waited past the cold hold ({model})"
        else:
            next_ms = min(next_ms, cold_hold_ms - age, age_bound_ms - age)
            skipped["cold hold"] = skipped.get("cold hold", 0) + 1
            continue
        return Choice(c.job_id, 0.0, why, i)
    hold = min(max(next_ms / 1000, HOLD_MIN_S), HOLD_MAX_S)
    told = ", ".join(f"{n} {k}" for k, n in sorted(skipped.items()))
    return Choice(None, hold, f"hold: {told}")


def models_to_ask(
    candidates: Sequence[Candidate], view: LocalView, now_ms: int, age_bound_ms: int
) -> list[str]:
    """The models whose warm and open zsets `choose` may ask about: those of the
    candidates before the first one taken without asking (no model,
    resident here, aged), less those backing off here; each once."""
    resident = view.resident()
    found: list[str] = []
    for c in candidates:
        model = c.model
        if model is None or model in resident:
            break
        if c.ready_ms is None or now_ms - c.ready_ms >= age_bound_ms:
            break
        if model not in found and not view.backing_off(model):
            found.append(model)
    return found


def _number(value: Any) -> float | None:
    """A finite number from a job hash field, else None."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def candidate(fields: Sequence[Any], model_for: ModelFor) -> Candidate:
    """A peeked job (id, name, timestamp, delay, data: peek_wait.lua's five
    fields) as a Candidate: its model from its name and data (None
    when its data is not JSON, or the resolver fails; data over the cap, not
    read, resolves as None data), ready at timestamp + delay."""
    job_id, name, timestamp, delay, data = fields
    model = None
    if isinstance(name, str):
        try:
            parsed = None if data is None else json.loads(data)
            model = model_for(name, parsed)
        except Exception:  # noqa: BLE001 - malformed data: no model; the run decides
            model = None
    stamp, wait = _number(timestamp), _number(delay)
    ready = None if stamp is None else int(stamp + max(wait or 0.0, 0.0))
    return Candidate(str(job_id), model if isinstance(model, str) else None, ready)
