"""The `loading_model` reason: a claimed job whose worker is loading its
model onto the GPU (a cold start), from the workers' heartbeats
(design24: a running summary in state "loading_model" with
`loading: {model, since_ms, expected_s}`) and, when the record gives no
expected time, the measured loads in `bullpen:models:stats` (ewma_load_s).

A waiting job whose model is loading on a GPU serving its queue right now
gets the same reason in `also`: it will likely run there once it is loaded.

Every field comes from another process's JSON: one that is odd (a bad
model name, a negative time) is left out, never raised.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from queues import codec

from ..keys import BullpenKeys
from ..models import MODEL_NAME
from .line import span
from .reasons import WaitingReason

#: A running summary's state while its worker loads the job's model.
LOADING_STATE = "loading_model"
#: Where an expected load time came from, as the message says it.
_SOURCES = {"worker": "expected", "past_loads": "from past loads"}


@dataclass(frozen=True)
class Loading:
    """A model loading on a GPU, as a worker's heartbeat says it."""

    model: str
    gpu: str
    host: str
    worker: str
    since_ms: int | None
    expected_s: float | None
    #: "worker" (the record's own), "past_loads" (models:stats), or None.
    source: str | None = None


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def seconds(value: Any) -> float | None:
    """A non-negative finite number of seconds, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) and number >= 0 else None


def model_name(value: Any) -> str | None:
    """A valid model name, else None."""
    return value if isinstance(value, str) and MODEL_NAME.fullmatch(value) else None


def _where(record: dict[str, Any]) -> tuple[str, str, str]:
    snap = record.get("gpu")
    gpu = snap.get("uuid", "") if isinstance(snap, dict) else ""
    return str(gpu), str(record.get("host", "")), str(record.get("id", ""))


def _running(record: dict[str, Any]) -> list[dict[str, Any]]:
    running = record.get("running")
    if not isinstance(running, list):
        return []
    return [j for j in running if isinstance(j, dict)]


def _of_summary(record: dict[str, Any], job: dict[str, Any]) -> Loading | None:
    """The load a running summary in state loading_model waits on."""
    if job.get("state") != LOADING_STATE:
        return None
    info = job.get("loading")
    info = info if isinstance(info, dict) else {}
    name = model_name(info.get("model")) or model_name(job.get("model"))
    if name is None:
        return None
    expected = seconds(info.get("expected_s"))
    return Loading(
        name,
        *_where(record),
        _int(info.get("since_ms")),
        expected,
        "worker" if expected is not None else None,
    )


def loading_jobs(
    records: Iterable[dict[str, Any]], prefix: str, queue: str
) -> dict[str, Loading]:
    """Job id -> the load it waits on, for the queue's jobs that a live
    worker's heartbeat lists in state loading_model."""
    found: dict[str, Loading] = {}
    for record in records:
        if (record.get("prefix"), record.get("queue")) != (prefix, queue):
            continue
        for job in _running(record):
            load = _of_summary(record, job)
            if load is not None and isinstance(job.get("id"), (str, int)):
                found.setdefault(str(job["id"]), load)
    return found


def loading_models(records: Iterable[dict[str, Any]]) -> dict[str, Loading]:
    """Model -> one GPU loading it now (the records' `models` in state
    loading, or a running job waiting on its load)."""
    found: dict[str, Loading] = {}
    for record in records:
        for job in _running(record):
            load = _of_summary(record, job)
            if load is not None:
                found.setdefault(load.model, load)
        models = record.get("models")
        for entry in models if isinstance(models, list) else []:
            if not isinstance(entry, dict) or entry.get("state") != "loading":
                continue
            name = model_name(entry.get("name"))
            if name is not None and name not in found:
                since = _int(entry.get("since_ms"))
                found[name] = Loading(name, *_where(record), since, None)
    return found


def with_past_loads(
    client: Any, keys: BullpenKeys, loads: Iterable[Loading]
) -> dict[str, float]:
    """Expected seconds per model from `models:stats` (ewma_load_s), for the
    loads that have no expected time of their own (one HMGET; none needed:
    no round trip)."""
    wanted = sorted({x.model for x in loads if x.expected_s is None})
    if not wanted:
        return {}
    found: dict[str, float] = {}
    for name, raw in zip(wanted, client.hmget(keys.model_stats(), wanted)):
        try:
            stats = codec.loads(raw) if raw else None
        except (codec.JSONDecodeError, TypeError, ValueError):
            continue
        value = seconds(stats.get("ewma_load_s")) if isinstance(stats, dict) else None
        if value is not None:
            found[name] = value
    return found


def expected(load: Loading, past: dict[str, float]) -> Loading:
    """The load with its expected time from past loads when it had none."""
    if load.expected_s is not None or load.model not in past:
        return load
    return replace(load, expected_s=past[load.model], source="past_loads")


def _clock(ms: int) -> str:
    return time.strftime("%H:%M:%S UTC", time.gmtime(ms / 1000))


def loading_reason(load: Loading, now_ms: int, waiting: bool = False) -> WaitingReason:
    """The `loading_model` reason of a load: for the claimed job waiting on
    it, or (`waiting`) for a job in line whose model it is."""
    where = f"GPU {load.gpu or '?'}" + (f" ({load.host})" if load.host else "")
    head = "Its model " if waiting else "Loading model "
    text = f"{head}{load.model} {'is loading ' if waiting else ''}on {where}"
    if load.since_ms is not None:
        text += f" since {_clock(load.since_ms)}"
        text += f" ({span(max(now_ms - load.since_ms, 0))} so far)"
    if load.expected_s is not None:
        text += f", about {span(int(load.expected_s * 1000))}"
        text += f" {_SOURCES.get(load.source or '', 'expected')}"
    numbers: dict[str, Any] = {
        "model": load.model,
        "gpu": load.gpu,
        "host": load.host,
        "since_ms": load.since_ms,
        "expected_s": load.expected_s,
    }
    return WaitingReason("loading_model", text, numbers)
