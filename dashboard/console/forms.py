"""Forms of the operator actions and of job search (all input is validated here)."""

from __future__ import annotations

import re
from typing import Any, cast

from django import forms

from gpu_workers.quota import BUDGET_MAX_S
from queues.defaults import PRIORITY_LIMIT

#: States `clean` may empty (active jobs are never cleaned from here).
CLEAN_STATES = [
    ("completed", "completed"),
    ("failed", "failed"),
    ("delayed", "delayed"),
    ("waiting", "waiting"),
    ("prioritized", "prioritized"),
]
#: States a search may scan.
SEARCH_STATES = [
    (s, s)
    for s in (
        "waiting",
        "active",
        "prioritized",
        "delayed",
        "waiting-children",
        "completed",
        "failed",
    )
]


def errors_text(form: forms.Form) -> str:
    """A form's errors as one line for a flash message."""
    parts = []
    for field, errs in form.errors.items():
        label = "" if field == "__all__" else f"{field}: "
        parts.append(label + " ".join(str(e) for e in errs))
    return "; ".join(parts) or "invalid input"


class ConfirmForm(forms.Form):
    """A destructive action the operator confirmed."""

    confirm = forms.BooleanField(
        required=True, error_messages={"required": "confirm the action first"}
    )


class PriorityForm(forms.Form):
    """A job's new priority (0 = none; 1 runs first)."""

    priority = forms.IntegerField(min_value=0, max_value=PRIORITY_LIMIT)
    lifo = forms.BooleanField(required=False)


class CleanForm(ConfirmForm):
    """Delete jobs of a state finished (or added) more than `grace_s` ago."""

    state = forms.ChoiceField(choices=CLEAN_STATES)
    grace_s = forms.IntegerField(min_value=0, initial=3600, label="older than (s)")
    limit = forms.IntegerField(min_value=0, required=False, label="at most")


class DrainForm(ConfirmForm):
    """Delete waiting and prioritized jobs, and delayed ones when asked."""

    delayed = forms.BooleanField(required=False, label="delayed jobs too")


class ObliterateForm(forms.Form):
    """Delete the queue and all its jobs; the operator types its name."""

    confirm = forms.CharField(max_length=200, label="type the queue's name")
    force = forms.BooleanField(required=False, label="even with active jobs")

    def __init__(self, *args: Any, queue_name: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.queue_name = queue_name

    def clean_confirm(self) -> str:
        value: str = self.cleaned_data["confirm"]
        if value != self.queue_name:
            raise forms.ValidationError(
                "type the queue's name exactly to obliterate it"
            )
        return value


class ConcurrencyForm(forms.Form):
    """Global concurrency; blank lifts the limit."""

    concurrency = forms.IntegerField(min_value=1, max_value=1_000_000, required=False)


class RateLimitForm(forms.Form):
    """Global rate limit: at most `max` jobs per `duration_ms`; both blank lifts it."""

    max = forms.IntegerField(min_value=1, max_value=1_000_000_000, required=False)
    duration_ms = forms.IntegerField(min_value=1, max_value=86_400_000, required=False)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if (data.get("max") is None) != (data.get("duration_ms") is None):
            raise forms.ValidationError("give both max and duration, or neither")
        return data


class GroupSettingsForm(forms.Form):
    """A group's own settings (docs/groups.md); a blank field clears the
    group's own value, so the queue's group defaults apply again."""

    weight = forms.IntegerField(min_value=1, max_value=1_000, required=False)
    concurrency = forms.IntegerField(min_value=0, max_value=1_000_000, required=False)
    rate_max = forms.IntegerField(min_value=1, max_value=1_000_000_000, required=False)
    rate_duration_ms = forms.IntegerField(
        min_value=1, max_value=86_400_000, required=False
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if (data.get("rate_max") is None) != (data.get("rate_duration_ms") is None):
            raise forms.ValidationError(
                "give both the rate's jobs and its window (ms), or neither"
            )
        return data


def group_settings_text(data: dict[str, Any], unset: str) -> str:
    """A GroupSettingsForm's cleaned data as an action's message says it
    (`unset` names a cleared setting)."""
    shown = ", ".join(
        f"{k} {unset if v is None else v}"
        for k, v in data.items()
        if k != "rate_duration_ms"
    )
    if data["rate_max"] is not None:
        shown += f" per {data['rate_duration_ms']} ms"
    return shown


class GroupBudgetForm(forms.Form):
    """A group's GPU-seconds per UTC day (gpu_workers/quota.py); blank
    removes the budget."""

    budget_s = forms.FloatField(
        min_value=0,
        max_value=BUDGET_MAX_S,
        required=False,
        label="GPU-seconds a day",
        error_messages={"invalid": "give a number of GPU-seconds, or nothing"},
    )


class SearchForm(forms.Form):
    """Find a job by id, or scan one state of one queue with filters."""

    job_id = forms.CharField(max_length=400, required=False, label="job id")
    queue = forms.ChoiceField(required=False, choices=[])
    state = forms.ChoiceField(choices=SEARCH_STATES, initial="failed", required=False)
    name = forms.CharField(max_length=200, required=False, label="name contains")
    text = forms.CharField(max_length=500, required=False, label="data contains")
    path = forms.CharField(
        max_length=200,
        required=False,
        label="JSON path",
        help_text="e.g. $.user.id or items[0].sku",
    )
    value = forms.CharField(max_length=500, required=False, label="equals")
    cursor = forms.IntegerField(min_value=0, required=False, widget=forms.HiddenInput)

    def __init__(self, *args: Any, queues: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = cast(forms.ChoiceField, self.fields["queue"])
        field.choices = [("", "any queue (job id only)")] + [(q, q) for q in queues]


_HEX = re.compile(r"^[0-9a-f]{16}$")


class RetryGroupForm(forms.Form):
    """Retry the failed jobs of one triage group (ids from one scanned window)."""

    signature = forms.CharField(max_length=16)
    ids = forms.CharField(max_length=1_000_000, widget=forms.HiddenInput)

    def clean_signature(self) -> str:
        value: str = self.cleaned_data["signature"]
        if not _HEX.match(value):
            raise forms.ValidationError("bad group signature")
        return value

    def clean_ids(self) -> list[str]:
        return [i for i in self.cleaned_data["ids"].split(",") if i][:100_000]
