"""The GPU page's models (issue 24): per GPU a stacked bar of the VRAM its
workers' budget holds (resident weights by model, loading ones marked, the
running jobs' working memory, free), the model loads and evictions per
model, the newest entries of `bullpen:models:events` for that GPU, and the
operators' pins.

Everything comes from other processes (worker heartbeats, a stream, a hash):
a record whose model fields are odd gives that GPU an error line, never an
exception; records without model fields (workers from before models) give
no bar at all, only pins when there are some.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from gpu_workers.fleet import one_per_process, parse_pins
from gpu_workers.models import MODEL_NAME, MODELS
from gpu_workers.units import format_bytes

#: Models one GPU's bar names; the rest are one "(other)" segment.
MODELS_SHOWN = 16
#: Newest stream entries read for the whole page, and shown per GPU.
EVENTS_READ = 500
EVENTS_SHOWN = 5
#: Segment colours (gpus.css m0..m7), chosen by the model's name.
PALETTE = 8
OTHER = "(other)"
STATES = ("loading", "resident", "unloading")
EVENT_KINDS = frozenset({"load", "evict", "load_failed", "load_oom"})
#: A model's counters in a heartbeat, and how the page names them.
COUNTERS = ("loads", "evictions", "load_failures", "load_ooms", "jobs")


class BadRecord(ValueError):
    """A heartbeat's model fields are not what the contract says."""


def _count(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadRecord(f"{what} is {str(value)[:40]!r}, not a count")
    return value


def _seconds(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if 0 <= value < float("inf") else None


def _name(value: Any, what: str = "a model name") -> str:
    if not isinstance(value, str) or not MODEL_NAME.fullmatch(value):
        raise BadRecord(f"{what} {str(value)[:40]!r} is not a valid model name")
    return value


def colour(name: str) -> str:
    """The segment class of a model: stable across pages and refreshes."""
    return f"m{zlib.crc32(name.encode()) % PALETTE}"


@dataclass
class Segment:
    """One part of a GPU's bar."""

    kind: str  # model | working | free
    label: str
    nbytes: int
    state: str = ""
    users: int = 0
    pinned: bool = False
    wanted: bool = False
    pct: float = 0.0

    @property
    def css(self) -> str:
        """Its classes: kind, colour, state."""
        if self.kind != "model":
            return self.kind
        shade = "other" if self.label == OTHER else colour(self.label)
        return f"model {shade} {self.state}".strip()

    @property
    def title(self) -> str:
        """The exact numbers, for the tooltip and the legend."""
        size = f"{format_bytes(self.nbytes)} ({self.nbytes:,} bytes)"
        if self.kind == "working":
            return f"running jobs' working memory: {size}"
        if self.kind == "free":
            return f"free to the budget: {size}"
        parts = [f"{self.label}: {size} weights", self.state]
        if self.users:
            parts.append(f"{self.users} running job{'s' if self.users != 1 else ''}")
        if self.pinned:
            parts.append("pinned")
        if self.wanted and not self.pinned:
            parts.append("in the warm pool")
        return ", ".join(p for p in parts if p)


@dataclass
class ModelCounts:
    """A model's loads and evictions on one GPU (its workers' counters)."""

    model: str
    loads: int = 0
    evictions: int = 0
    load_failures: int = 0
    load_ooms: int = 0
    jobs: int = 0
    load_seconds_sum: float = 0.0

    @property
    def mean_load_s(self) -> float | None:
        """The mean load time, None before any load."""
        return self.load_seconds_sum / self.loads if self.loads else None


@dataclass
class ModelEvent:
    """One entry of the events stream."""

    kind: str
    model: str
    seconds: float | None
    nbytes: int | None
    ts_ms: int | None


@dataclass
class Pin:
    """An operator's pin on a GPU."""

    model: str
    declared: bool
    resident: bool


@dataclass
class ModelPanel:
    """A GPU's models: the bar, counters, events, pins and odd records."""

    gpu: str
    has_models: bool = False
    budget_bytes: int = 0
    weights_bytes: int = 0
    working_bytes: int = 0
    segments: list[Segment] = field(default_factory=list)
    counts: list[ModelCounts] = field(default_factory=list)
    events: list[ModelEvent] = field(default_factory=list)
    pins: list[Pin] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def free_bytes(self) -> int:
        """The budget less what is committed (never below 0)."""
        return max(self.budget_bytes - self.weights_bytes - self.working_bytes, 0)

    @property
    def over_bytes(self) -> int:
        """Committed past the budget (a record that says so), else 0."""
        return max(self.weights_bytes + self.working_bytes - self.budget_bytes, 0)


def entries(record: dict[str, Any]) -> list[dict[str, Any]]:
    """A record's `models`, checked: name, state, bytes, users, pinned,
    wanted of each (BadRecord when one is odd)."""
    models = record.get("models")
    if not isinstance(models, list):
        raise BadRecord("models is not a list")
    out = []
    for entry in models:
        if not isinstance(entry, dict):
            raise BadRecord("a models entry is not an object")
        state = entry.get("state")
        if state not in STATES:
            raise BadRecord(f"model state {str(state)[:20]!r} is not one of {STATES}")
        out.append(
            {
                "name": _name(entry.get("name")),
                "state": state,
                "bytes": _count(entry.get("weights_bytes"), "weights_bytes"),
                "users": _count(entry.get("users", 0), "users"),
                "pinned": entry.get("pinned") is True,
                "wanted": entry.get("wanted") is True,
            }
        )
    return out


def counters(record: dict[str, Any]) -> dict[str, ModelCounts]:
    """A record's `model_counters`, checked (BadRecord when one is odd)."""
    raw = record.get("model_counters", {})
    if not isinstance(raw, dict):
        raise BadRecord("model_counters is not an object")
    found = {}
    for name, values in raw.items():
        if not isinstance(values, dict):
            raise BadRecord(f"model_counters of {str(name)[:40]!r} is not an object")
        counts = ModelCounts(_name(name, "model_counters names"))
        for key in COUNTERS:
            setattr(counts, key, _count(values.get(key, 0), key))
        spent = _seconds(values.get("load_seconds_sum", 0))
        if spent is None:
            raise BadRecord("load_seconds_sum is not a number of seconds")
        counts.load_seconds_sum = spent
        found[counts.model] = counts
    return found


def _add_record(
    panel: ModelPanel, record: dict[str, Any], merged: dict[str, Any]
) -> None:
    """One worker record's models into its GPU's panel (BadRecord: none of it)."""
    listed = entries(record)
    working = _count(record.get("working_bytes", 0), "working_bytes")
    counted = counters(record)
    panel.has_models = True
    panel.working_bytes += working
    for e in listed:
        seen = merged.setdefault(e["name"], {**e, "bytes": 0, "users": 0})
        seen["bytes"] += e["bytes"]
        seen["users"] += e["users"]
        seen["pinned"] = seen["pinned"] or e["pinned"]
        seen["wanted"] = seen["wanted"] or e["wanted"]
        if e["state"] != "resident":  # loading or unloading is what to show
            seen["state"] = e["state"]
    for name, c in counted.items():
        total = next((x for x in panel.counts if x.model == name), None)
        if total is None:
            panel.counts.append(c)
            continue
        for key in (*COUNTERS, "load_seconds_sum"):
            setattr(total, key, getattr(total, key) + getattr(c, key))


def _segments(panel: ModelPanel, merged: dict[str, Any], pinned: set[str]) -> None:
    order = sorted(merged.values(), key=lambda e: (-e["bytes"], e["name"]))
    shown, rest = order[:MODELS_SHOWN], order[MODELS_SHOWN:]
    for e in shown:
        panel.segments.append(
            Segment(
                "model",
                e["name"],
                e["bytes"],
                e["state"],
                e["users"],
                e["pinned"] or e["name"] in pinned,
                e["wanted"],
            )
        )
    if rest:
        panel.segments.append(
            Segment(
                "model",
                OTHER,
                sum(e["bytes"] for e in rest),
                "resident",
                sum(e["users"] for e in rest),
            )
        )
    panel.weights_bytes = sum(s.nbytes for s in panel.segments)
    panel.segments.append(Segment("working", "working", panel.working_bytes))
    panel.segments.append(Segment("free", "free", panel.free_bytes))
    scale = max(panel.budget_bytes, panel.weights_bytes + panel.working_bytes, 1)
    for s in panel.segments:
        s.pct = 100.0 * s.nbytes / scale


def parse_events(entries: Iterable[Any]) -> dict[str, list[ModelEvent]]:
    """XREVRANGE entries (newest first) per GPU, the newest EVENTS_SHOWN
    each; an entry with an odd kind, model or GPU is skipped."""
    found: dict[str, list[ModelEvent]] = {}
    for item in entries:
        try:
            _, fields = item
            gpu, kind, model = (
                fields.get("gpu"),
                fields.get("kind"),
                fields.get("model"),
            )
        except (TypeError, ValueError, AttributeError):
            continue
        if not isinstance(gpu, str) or kind not in EVENT_KINDS:
            continue
        if not isinstance(model, str) or not MODEL_NAME.fullmatch(model):
            continue
        mine = found.setdefault(gpu, [])
        if len(mine) < EVENTS_SHOWN:
            mine.append(
                ModelEvent(
                    kind,
                    model,
                    _seconds(_number(fields.get("seconds"))),
                    _whole(fields.get("bytes")),
                    _whole(fields.get("ts_ms")),
                )
            )
    return found


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _whole(value: Any) -> int | None:
    number = _number(value)
    if number is None or not 0 <= number < 2**63:
        return None
    return int(number)


def _named(records: list[dict[str, Any]]) -> set[str]:
    """Model names the records mention (resident or counted), leniently."""
    names: set[str] = set()
    for record in records:
        models = record.get("models")
        for entry in models if isinstance(models, list) else []:
            if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                names.add(entry["name"])
        counters = record.get("model_counters")
        names.update(counters if isinstance(counters, dict) else ())
    return {n for n in names if isinstance(n, str) and MODEL_NAME.fullmatch(n)}


def panels(
    gpus: Iterable[tuple[str, int]],
    records: list[dict[str, Any]],
    client: Any,
    keys: Any,
) -> dict[str, ModelPanel]:
    """A ModelPanel per GPU uuid of `gpus` (uuid, budget): its workers'
    records' models, plus pins and events read in one pipelined round trip."""
    pipe = client.pipeline(transaction=False)
    pipe.hgetall(keys.model_pins())
    pipe.xrevrange(keys.model_events(), count=EVENTS_READ)
    pipe.hkeys(keys.model_stats())
    raw_pins, raw_events, stats = pipe.execute()
    pins = parse_pins(raw_pins or {})
    events = parse_events(raw_events or [])
    declared = {*MODELS.names(), *(stats or []), *_named(records)}
    found = {}
    for uuid, budget in gpus:
        panel = ModelPanel(uuid, budget_bytes=budget)
        merged: dict[str, Any] = {}
        for record in one_per_process(records):  # a GPU process's queues: once
            snap = record.get("gpu")
            if not isinstance(snap, dict) or snap.get("uuid") != uuid:
                continue
            if "models" not in record:
                continue  # a worker from before models
            try:
                _add_record(panel, record, merged)
            except BadRecord as exc:
                panel.errors.append(f"worker {str(record.get('id', '?'))[:80]}: {exc}")
        mine = pins.get(uuid, [])
        if panel.has_models:
            _segments(panel, merged, set(mine))
        panel.counts.sort(key=lambda c: c.model)
        panel.events = events.get(uuid, [])
        panel.pins = [Pin(m, m in declared, m in merged) for m in mine]
        found[uuid] = panel
    return found
