"""What the GPU page shows of a fleet of any size, from the process's fleet
snapshot (gpu_workers/fleet_snapshot.py): the summary, the grid's compact
cells, the filters (host, queue, model, state: query parameters, checked
here) and the page of hosts whose per-GPU cards are drawn. Nothing here
reads Redis: the cost of a page does not grow with the fleet."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from gpu_workers.fleet_snapshot import GPU_STATES, FleetSnapshot

#: Hosts whose GPU cards one page draws.
HOSTS_PER_PAGE = 4
#: Longest host, queue or model text a filter takes.
FILTER_MAX_CHARS = 200


@dataclass(frozen=True)
class FleetFilter:
    """The page's filters, as validated from the query string ("" = any)."""

    host: str = ""
    queue: str = ""
    model: str = ""
    state: str = ""
    gpu: str = ""
    page: int = 1

    @classmethod
    def from_query(cls, query: Any) -> FleetFilter:
        """From request.GET: text trimmed and bounded, an unknown state or a
        page that is not a positive number read as none."""

        def text(name: str) -> str:
            value = query.get(name, "")
            return value.strip()[:FILTER_MAX_CHARS] if isinstance(value, str) else ""

        state = text("state")
        try:
            page = max(1, min(int(text("page") or 1), 1_000_000))
        except ValueError:
            page = 1
        return cls(
            host=text("host"),
            queue=text("queue"),
            model=text("model"),
            state=state if state in GPU_STATES else "",
            gpu=text("gpu"),
            page=page,
        )

    @property
    def active(self) -> bool:
        """Whether any filter (not the page) narrows the GPUs."""
        return bool(self.host or self.queue or self.model or self.state or self.gpu)

    def query(self, **change: Any) -> str:
        """The query string of these filters with `change` (for links)."""
        values = {
            "host": self.host,
            "queue": self.queue,
            "model": self.model,
            "state": self.state,
            "gpu": self.gpu,
            "page": self.page,
            **change,
        }
        kept = {k: v for k, v in values.items() if v and not (k == "page" and v == 1)}
        return urlencode(kept)


def _host_matches(snap: FleetSnapshot, wanted: str) -> set[str]:
    """An exact host name when one is, else the names that contain it."""
    names = set(snap.gpus_by_host) | {str(h.get("host", "")) for h in snap.hosts}
    if wanted in names:
        return {wanted}
    low = wanted.lower()
    return {n for n in names if low in n.lower()}


def matching(snap: FleetSnapshot, flt: FleetFilter) -> set[int]:
    """Indices of the snapshot's GPUs the filters keep."""
    hosts = _host_matches(snap, flt.host) if flt.host else None
    found = set()
    for i, g in enumerate(snap.gpus):
        if hosts is not None and g["host"] not in hosts:
            continue
        if flt.queue and flt.queue not in snap.gpu_queues[i]:
            continue
        if flt.model and flt.model not in snap.gpu_models[i]:
            continue
        if flt.state and snap.gpu_state[i] != flt.state:
            continue
        if flt.gpu and g["uuid"] != flt.gpu:
            continue
        found.add(i)
    return found


@dataclass
class HostPage:
    """The hosts one page draws cards for, and where the others are."""

    names: list[str]
    gpus: set[int] | None
    number: int
    pages: int
    hosts: int
    gpus_matching: int


def host_page(snap: FleetSnapshot, flt: FleetFilter) -> HostPage:
    """The page `flt.page` of the hosts with a GPU the filters keep (every
    live host when none filters), HOSTS_PER_PAGE at a time."""
    if flt.active:
        keep = matching(snap, flt)
        names = sorted({snap.gpus[i]["host"] for i in keep})
        if flt.host and not flt.queue and not flt.model and not flt.state:
            # A host without GPUs (CPU-only) is still shown when named.
            names = sorted(set(names) | _host_matches(snap, flt.host))
        gpus: set[int] | None = keep
    else:
        names = [str(h.get("host", "")) for h in snap.hosts]
        gpus, keep = None, set(range(len(snap.gpus)))
    pages = max(1, -(-len(names) // HOSTS_PER_PAGE))
    number = min(flt.page, pages)
    start = (number - 1) * HOSTS_PER_PAGE
    return HostPage(
        names[start : start + HOSTS_PER_PAGE],
        gpus,
        number,
        pages,
        len(names),
        len(keep),
    )


def grid(snap: FleetSnapshot, flt: FleetFilter) -> dict[str, Any]:
    """The grid's data (JSON): every GPU as a compact cell, which ones the
    filters keep, the snapshot's time (its version for live diffs)."""
    keep = matching(snap, flt) if flt.active else None
    return {
        "version": snap.taken_ms,
        "fields": ["host", "index", "uuid", "state", "util", "vram", "committed"],
        "cells": [snap.cell(i) for i in range(len(snap.gpus))],
        "match": None if keep is None else sorted(keep),
    }


def choices(snap: FleetSnapshot) -> dict[str, list[str]]:
    """What the filters offer: served queues, models resident somewhere."""
    return {
        "queues": sorted(snap.per_queue),
        "models": sorted(snap.per_model),
        "states": list(GPU_STATES),
    }
