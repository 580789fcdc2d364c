"""Panels an app adds to the operator app's job page without either app
importing the other: the producer API registers its webhook deliveries here
when it is installed (dashboard/api/apps.py), and the job page renders
whatever is registered, in order. Each panel is a function of (queue prefix,
queue name, job id) that returns its HTML, or "" to show nothing."""

from __future__ import annotations

from collections.abc import Callable

JobPanel = Callable[[str, str, str], str]

_job_panels: dict[str, JobPanel] = {}


def add_job_panel(name: str, panel: JobPanel) -> None:
    """Show `panel` on every job page (once per `name`: an app's ready() may
    run again in tests)."""
    _job_panels[name] = panel


def job_panels(prefix: str, queue: str, job_id: str) -> list[str]:
    """The registered panels' HTML for one job, empty ones left out."""
    shown = (panel(prefix, queue, job_id) for panel in _job_panels.values())
    return [html for html in shown if html]
