"""What the queue page's job list offers beside its rows: the verbs of its
rows and of its action bar (on the selected jobs, and on all matching as a
batch), all declared in shared/verbs.py; how each tab sorts (the order Redis
keeps: no sort costs a scan), and the newest batch's progress."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.template.loader import render_to_string
from django.urls import reverse

from dashboard.shared.discovery import QueueRef
from dashboard.shared.verbs import VERBS, Verb
from dashboard.shared.verbs import offered as offered_to

from ..bulk import records, runner

#: How a tab's list is ordered in Redis: (what, "newest" label, "oldest" label).
SORTS: dict[str, tuple[str, str, str]] = {
    "waiting": ("queue position", "last in first", "next to run first"),
    "prioritized": ("priority", "lowest priority first", "highest priority first"),
    "delayed": ("run time", "latest run first", "soonest run first"),
    "completed": ("finish time", "newest first", "oldest first"),
    "failed": ("failure time", "newest first", "oldest first"),
    "active": ("start order", "newest first", "oldest first"),
    "waiting-children": ("time added", "newest first", "oldest first"),
}
#: The "latest" tab: each state in turn, each in its own order.
MIXED = ("state, then each state's own order", "newest first", "oldest first")


def _shown(verb: Verb, batch: bool = False) -> dict[str, Any]:
    """A verb as a row or the bar shows it: its confirmation split around
    the job(s) it names (the template puts them in), its parameter fields
    (detached from the list's form: see Verb.form)."""
    before, _, after = verb.confirm.partition("{what}")
    form = verb.form(detached=True)
    return {
        "verb": verb,
        "ask_before": before,
        "ask_after": after,
        "form": form,
        # Rendered once a page, not once a row: the fields are the same in
        # every row (no ids), and rendering a form's widgets 50 times doubled
        # the queue page's time.
        "fields": render_to_string("dashboard/_verb_fields.html", {"form": form})
        if form
        else "",
        "batch": batch,
    }


def verbs(tab: str, states: Sequence[str]) -> dict[str, Any]:
    """The action bar's verbs for the tab (with whether a batch may run them
    on all matching), each row state's verbs, and the tab's sort words."""
    single = states[0] if len(states) == 1 else ""
    offered = [
        _shown(verb, single in verb.batch_states)
        for verb in VERBS.values()
        if verb.states & set(states)
    ]
    sort_by, newest, oldest = SORTS.get(single, MIXED)
    return {
        "bulk_verbs": offered,
        "row_verbs": {s: [_shown(v) for v in offered_to(s)] for s in states},
        "sort_by": sort_by,
        "newest_label": newest,
        "oldest_label": oldest,
    }


def batch_context(ref: QueueRef) -> dict[str, Any]:
    """The queue's newest batch for `_batch.html` (None when there is none);
    one that nobody runs (its process died) is taken up here."""
    batch = records.latest(ref.prefix, ref.name)
    if batch is not None and batch.running and not records.is_leased(batch.id):
        runner.ensure_started()
    return {
        "batch": batch,
        "batch_text": runner.describe(batch) if batch else "",
        "batch_url": reverse("bullpen:queue-batch", args=[ref.prefix, ref.name]),
    }
