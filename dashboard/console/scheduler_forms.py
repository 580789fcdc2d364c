"""The job scheduler form: every input of a create, an edit or a restore is
checked here (cron by the queue core's croniter, time zone, limits, template
JSON, opts limited to what `Queue.add` accepts), so a bad one changes nothing."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django import forms

from queues import ops
from queues.cron import cron_next
from queues.exceptions import InvalidJobOptions
from queues.options import PY_TO_BULLMQ, STAMPED_OPTIONS, build_opts, refuse_stamped
from queues.scheduler import LARGEST_NUMBER, JobScheduler, check_scheduler_id

#: Longest template data JSON accepted from the form (characters).
DATA_CHARS = 65_536
#: Longest template opts JSON accepted from the form (characters).
OPTS_CHARS = 8_192
#: `add` options a template may not set: the scheduler sets id, delay and
#: timestamp itself, and BullMQ refuses deduplication on schedulers.
NOT_IN_TEMPLATE = ("job_id", "delay", "timestamp", "deduplication")
#: BullMQ option names a template's opts may hold, and their `add` keywords
#: (never one Bullpen stamps itself: `tenant` is the HTTP API's to set).
TEMPLATE_OPTS = {
    long: py
    for py, long in PY_TO_BULLMQ.items()
    if py not in NOT_IN_TEMPLATE and long not in STAMPED_OPTIONS
}


def add_kwargs(opts: dict[str, Any]) -> dict[str, Any]:
    """A template's opts (BullMQ names) as `Queue.add` keywords; ValueError
    naming the options it cannot take."""
    refuse_stamped(opts)
    unknown = sorted(set(opts) - set(TEMPLATE_OPTS))
    if unknown:
        allowed = ", ".join(sorted(TEMPLATE_OPTS))
        raise ValueError(f"opts cannot hold {', '.join(unknown)} (allowed: {allowed})")
    return {TEMPLATE_OPTS[k]: v for k, v in opts.items()}


def initial_of(s: JobScheduler) -> dict[str, Any]:
    """The form's fields for an existing scheduler (edit, restore)."""
    opts = s.template.get("opts") or {}
    return {
        "scheduler_id": s.key,
        "every_ms": s.every,
        "pattern": s.pattern or "",
        "tz": s.tz or "",
        "limit": s.limit,
        "start_date_ms": s.start_date,
        "end_date_ms": s.end_date,
        "offset_ms": s.offset,
        "name": s.name,
        "job_data": json.dumps(s.template.get("data", {}), ensure_ascii=False),
        "job_opts": json.dumps(opts, ensure_ascii=False) if opts else "",
    }


class SchedulerForm(forms.Form):
    """A scheduler's definition: every `every_ms` or on a cron `pattern`."""

    scheduler_id = forms.CharField(max_length=200, label="id")
    every_ms = forms.IntegerField(
        min_value=1, max_value=LARGEST_NUMBER, required=False, label="every (ms)"
    )
    pattern = forms.CharField(max_length=200, required=False, label="cron pattern")
    tz = forms.CharField(max_length=64, required=False, label="time zone")
    limit = forms.IntegerField(
        min_value=1, max_value=LARGEST_NUMBER, required=False, label="at most (runs)"
    )
    start_date_ms = forms.IntegerField(
        min_value=0, max_value=LARGEST_NUMBER, required=False
    )
    end_date_ms = forms.IntegerField(
        min_value=0, max_value=LARGEST_NUMBER, required=False
    )
    offset_ms = forms.IntegerField(
        min_value=0, max_value=LARGEST_NUMBER, required=False
    )
    name = forms.CharField(max_length=200, required=False, label="job name")
    job_data = forms.CharField(
        max_length=DATA_CHARS, required=False, widget=forms.Textarea(attrs={"rows": 3})
    )
    job_opts = forms.CharField(
        max_length=OPTS_CHARS, required=False, widget=forms.Textarea(attrs={"rows": 2})
    )

    def clean_scheduler_id(self) -> str:
        """Refuse ids BullMQ keys could not hold (':', control characters)."""
        value: str = self.cleaned_data["scheduler_id"].strip()
        try:
            return check_scheduler_id(value)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from exc

    def clean_tz(self) -> str:
        """A time zone the tz database knows, or empty (the process's zone)."""
        value: str = self.cleaned_data["tz"].strip()
        if value:
            try:
                ZoneInfo(value)
            except (ZoneInfoNotFoundError, ValueError) as exc:
                raise forms.ValidationError(f"unknown time zone {value!r}") from exc
        return value

    def clean_job_data(self) -> Any:
        """Template data: any JSON value (empty = {})."""
        text = self.cleaned_data["job_data"].strip()
        if not text:
            return {}
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"not JSON: {exc}") from exc

    def clean_job_opts(self) -> dict[str, Any]:
        """Template opts: a JSON object of `add` options, in BullMQ's names."""
        text = self.cleaned_data["job_opts"].strip()
        if not text:
            return {}
        try:
            opts = json.loads(text)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"not JSON: {exc}") from exc
        if not isinstance(opts, dict):
            raise forms.ValidationError("must be a JSON object")
        try:
            build_opts(**add_kwargs(opts))
        except (ValueError, TypeError) as exc:
            raise forms.ValidationError(str(exc)) from exc
        return opts

    def clean(self) -> dict[str, Any]:
        """Exactly one of every and pattern; a pattern that has a next run."""
        data: dict[str, Any] = super().clean() or {}
        every, pattern = data.get("every_ms"), (data.get("pattern") or "").strip()
        data["pattern"] = pattern
        if (every is None) == (not pattern):
            raise forms.ValidationError("give either every (ms) or a cron pattern")
        if pattern and data.get("offset_ms"):
            self.add_error("offset_ms", "an offset goes with every (ms) only")
        now = ops.now_ms()
        end = data.get("end_date_ms")
        if end is not None and end < now:
            self.add_error("end_date_ms", "must be in the future")
        if pattern and "tz" in data:
            try:
                first = cron_next(
                    pattern, now, data["tz"] or None, data.get("start_date_ms"), end
                )
            except InvalidJobOptions as exc:
                self.add_error("pattern", str(exc))
            else:
                if first is None:
                    self.add_error("pattern", "never runs before the end date")
        return data

    def upsert_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of `Queue.upsert_job_scheduler` (after is_valid)."""
        d = self.cleaned_data
        template: dict[str, Any] = {"data": d["job_data"]}
        if d["name"]:
            template["name"] = d["name"]
        if d["job_opts"]:
            template["opts"] = add_kwargs(d["job_opts"])
        return {
            "every_ms": d["every_ms"],
            "cron": d["pattern"] or None,
            "tz": d["tz"] or None,
            "limit": d["limit"],
            "start_date": d["start_date_ms"],
            "end_date": d["end_date_ms"],
            "offset_ms": d["offset_ms"],
            "template": template,
        }


def local_zone() -> str:
    """The zone a pattern without `tz` runs in (this process's, as in Node)."""
    return str(datetime.now().astimezone().tzinfo)
