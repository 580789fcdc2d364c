"""The warm pools' plan, a pure function: which model each live GPU should
keep resident, from each model's backlog and mean job seconds, damped by
hysteresis (pools.py runs it in a supervisor and writes its record).

Shares: one GPU for each model with a backlog (by demand = waiting jobs x
mean job seconds) while GPUs remain, the rest by highest averages
(Sainte-Lague). A model's count of GPUs changes only when its proportional
share moved by at least `dead_band_gpus` GPUs and `dead_band_share` of what
it has; a GPU changes model only once the plan has wanted the same change
for `hold_ticks` ticks in a row and `hold_s` seconds, and after it kept its
model `min_dwell_s`. Pinned GPUs keep their pins and nothing else. Ties go
by name, so the same inputs give the same plan.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from . import defaults


@dataclass(frozen=True)
class GpuView:
    """A live GPU as the plan sees it."""

    budget_bytes: int
    #: Models whose jobs wait in a queue this GPU serves and whose weights fit.
    fits: frozenset[str]
    #: Models resident there now (a tie goes to them).
    resident: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Hysteresis:
    """How much the plan holds back (see the module's docstring)."""

    hold_ticks: int = defaults.POOL_HOLD_TICKS
    hold_s: float = defaults.POOL_HOLD_S
    min_dwell_s: float = defaults.POOL_MIN_DWELL_S
    dead_band_gpus: float = defaults.POOL_DEAD_BAND_GPUS
    dead_band_share: float = defaults.POOL_DEAD_BAND_SHARE


@dataclass(frozen=True)
class GpuState:
    """What the plan remembers of a GPU between ticks."""

    #: When its current assignment took effect (seconds).
    since: float = -math.inf
    #: The change it wants, since when, for how many ticks in a row.
    pending: tuple[str, ...] = ()
    pending_since: float = 0.0
    pending_ticks: int = 0


@dataclass(frozen=True)
class Assignment:
    """A GPU's pool: operators' pins first, then the planned model."""

    models: tuple[str, ...]
    planned: tuple[str, ...]
    why: str


def plan(
    gpus: Mapping[str, GpuView],
    backlog: Mapping[str, float],
    job_seconds: Mapping[str, float],
    current: Mapping[str, tuple[str, ...]],
    pins: Mapping[str, tuple[str, ...]],
    state: Mapping[str, GpuState],
    now: float,
    rules: Hysteresis | None = None,
) -> tuple[dict[str, Assignment], dict[str, GpuState]]:
    """Each GPU's pool and the state for the next tick. `current`: the
    planned models now (pins apart); a GPU without one is assigned at once,
    a pinned GPU keeps its pins and nothing else, every other change waits
    out the hysteresis. Deterministic: ties go by name."""
    rules = rules or Hysteresis()
    demand = {
        m: b * job_seconds.get(m, 1.0)
        for m, b in backlog.items()
        if b > 0 and job_seconds.get(m, 1.0) > 0
    }
    pinned = {g: tuple(pins[g]) for g in gpus if pins.get(g)}
    free = sorted(g for g in gpus if g not in pinned)
    supply = Counter(m for models in pinned.values() for m in models)
    targets = _targets(free, gpus, demand, current, supply, rules)
    wanted = _assign(free, gpus, demand, current, supply, targets)
    out: dict[str, Assignment] = {}
    new_state: dict[str, GpuState] = {}
    for g in sorted(pinned):
        out[g] = Assignment(pinned[g], (), "pinned by an operator")
        new_state[g] = GpuState(state.get(g, GpuState(now)).since)
    for g in free:
        cur = tuple(current.get(g, ()))
        out[g], new_state[g] = _settle(
            cur, wanted[g], state.get(g, GpuState()), now, rules, backlog
        )
    return out, new_state


def _best(models: Iterable[str], score: Callable[[str], Any]) -> str | None:
    """The model of the highest score, the first by name on a tie."""
    best: str | None = None
    for m in sorted(models):
        if best is None or score(m) > score(best):
            best = m
    return best


def _targets(
    free: list[str],
    gpus: Mapping[str, GpuView],
    demand: Mapping[str, float],
    current: Mapping[str, tuple[str, ...]],
    supply: Mapping[str, int],
    rules: Hysteresis,
) -> dict[str, int]:
    """GPUs per model: one for each model with a backlog (by demand) while
    GPUs remain, the rest by highest averages (Sainte-Lague); a model whose
    proportional share moved less than the dead band keeps what it has."""
    servable = {m for m in demand if any(m in gpus[g].fits for g in free)}
    targets = dict.fromkeys(servable, 0)
    seats = len(free)
    for m in sorted(servable, key=lambda m: (-demand[m], m)):
        if seats and not supply.get(m):
            targets[m], seats = 1, seats - 1
    while seats > 0 and servable:
        top = _best(
            servable, lambda m: demand[m] / (targets[m] + supply.get(m, 0) + 0.5)
        )
        assert top is not None
        targets[top], seats = targets[top] + 1, seats - 1
    total = sum(demand[m] for m in servable)
    pool = len(free) + sum(supply.get(m, 0) for m in servable)
    have = Counter(m for g in free for m in current.get(g, ()) if m in gpus[g].fits)
    for m in servable:
        share = max(pool * demand[m] / total - supply.get(m, 0), 0.0)
        band = max(rules.dead_band_gpus, rules.dead_band_share * have[m])
        if have[m] and abs(share - have[m]) < band:
            targets[m] = have[m]
    return targets


def _assign(
    free: list[str],
    gpus: Mapping[str, GpuView],
    demand: Mapping[str, float],
    current: Mapping[str, tuple[str, ...]],
    supply: Mapping[str, int],
    targets: Mapping[str, int],
) -> dict[str, tuple[str, ...]]:
    """The model each free GPU should hold: its own while its model's target
    has room, else the fitting model furthest below its target."""
    got: Counter[str] = Counter()
    wanted: dict[str, tuple[str, ...]] = {}
    for g in free:
        for m in current.get(g, ()):
            if m in targets and m in gpus[g].fits and got[m] < targets[m]:
                wanted[g] = (m,)
                got[m] += 1
                break
    for g in free:
        if g in wanted:
            continue
        fits = [m for m in targets if m in gpus[g].fits]
        short = [m for m in fits if got[m] < targets[m]]
        mine = [m for m in current.get(g, ()) if m in fits]
        resident = gpus[g].resident
        choice = _best(
            short or mine or fits,
            lambda m, resident=resident: (  # type: ignore[misc]
                demand[m] / (got[m] + supply.get(m, 0) + 0.5),
                m in resident,
            ),
        )
        if choice is None:  # nothing waiting fits here: keep what it has
            wanted[g] = tuple(current.get(g, ()))
        else:
            wanted[g] = (choice,)
            got[choice] += 1
    return wanted


def _settle(
    cur: tuple[str, ...],
    want: tuple[str, ...],
    st: GpuState,
    now: float,
    rules: Hysteresis,
    backlog: Mapping[str, float],
) -> tuple[Assignment, GpuState]:
    """Apply the hysteresis to one GPU's wanted change."""
    names = ", ".join(f"{m} ({backlog.get(m, 0):.0f} waiting)" for m in want)
    if not cur:
        if not want:
            return Assignment((), (), "no waiting job's model fits here"), GpuState()
        return Assignment(want, want, f"assigned {names}"), GpuState(now)
    if want == cur:
        return Assignment(cur, cur, "kept"), GpuState(st.since)
    same = st.pending == want
    ticks = st.pending_ticks + 1 if same else 1
    pending_since = st.pending_since if same else now
    waited, dwelt = now - pending_since, now - st.since
    was = ", ".join(cur)
    if (
        ticks >= rules.hold_ticks
        and waited >= rules.hold_s
        and dwelt >= rules.min_dwell_s
    ):
        why = f"moved from {was} to {names} after {ticks} ticks ({waited:.0f} s)"
        return Assignment(want, want, why), GpuState(now)
    why = (
        f"holding {was}: the plan wants {names} for {ticks}/{rules.hold_ticks} "
        f"ticks, {waited:.0f}/{rules.hold_s:g} s; kept {min(dwelt, 1e9):.0f}/"
        f"{rules.min_dwell_s:g} s"
    )
    return Assignment(cur, cur, why), replace(
        st, pending=want, pending_since=pending_since, pending_ticks=ticks
    )
