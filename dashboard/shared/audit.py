"""The audit log for an app that cannot import the operator app: the producer
API records its admin actions (a group's settings, pause, resume) here, and
the operator app, when installed, registers the writer of its audit log
(dashboard/console/apps.py) so they are listed beside the operators' own.
Without a writer they go to the `bullpen.audit` logger."""

from __future__ import annotations

import logging
from collections.abc import Callable

log = logging.getLogger("bullpen.audit")

#: (actor, target, action, outcome, detail) -> None; actor names who did it
#: when no user did (`api:<token name> (<prefix>)`).
AuditWriter = Callable[[str, str, str, str, str], None]

_writers: dict[str, AuditWriter] = {}


def add_audit_writer(name: str, writer: AuditWriter) -> None:
    """Send every entry to `writer` too (once per `name`: an app's ready()
    may run again in tests)."""
    _writers[name] = writer


def record(actor: str, target: str, action: str, outcome: str, detail: str) -> None:
    """One audited action: to every registered writer, else to the log."""
    if not _writers:
        log.info("%s %s %s %s: %s", actor, action, target, outcome, detail)
    for writer in list(_writers.values()):
        writer(actor, target, action, outcome, detail)
