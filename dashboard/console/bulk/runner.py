"""The batch runner: one daemon thread per dashboard process that runs the
batches in Redis's running set, a chunk at a time with a pause between
chunks (so the pages it shares Redis and the process with stay fast), and
takes over a batch whose lease expired (its process died). It starts with
the server (asgi.py), when a batch starts, and when a page shows a batch
nobody runs; it ends once no batch is left running.

One audit row per batch: written when it starts (views/bulk.py) and updated
here with the final counts when it ends, is cancelled, or fails."""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
import threading
import time

from django.db import close_old_connections

from queues import ops
from queues.outages import recoverable

from ..models import AuditEntry
from . import records
from .records import CANCELLED, DONE, FAILED, Batch
from .steps import step

log = logging.getLogger(__name__)

#: Jobs per chunk (one short Redis call each; a remove chunk is one pipeline).
CHUNK = 250
#: Seconds between chunks at least, and at least as long as the chunk took:
#: a batch holds Redis and the process's GIL half the time at most, so the
#: pages it shares them with stay fast (bench/dashboard.py measures it).
PAUSE_S = 0.05
#: Failed chunks in a row (Redis down) after which a batch ends as failed.
MAX_FAILURES = 20

_lock = threading.Lock()
_thread: threading.Thread | None = None


def owner_id() -> str:
    """This process's name on the leases it holds."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


def ensure_started() -> None:
    """Start this process's runner thread unless it runs already."""
    global _thread
    with _lock:
        if _thread is not None and _thread.is_alive():
            return
        _thread = threading.Thread(target=_loop, name="bullpen-batches", daemon=True)
        _thread.start()


def _loop() -> None:
    owner = owner_id()
    try:
        while True:
            try:
                ids = records.running_ids()
            except Exception as exc:  # noqa: BLE001 - Redis down: try later
                log.warning("batch runner cannot read batches: %s", exc)
                time.sleep(records.LEASE_S / 3)
                continue
            if not ids:
                return
            ran = False
            for batch_id in ids:
                if records.claim(batch_id, owner):
                    run_batch(batch_id, owner)
                    ran = True
            if not ran:  # others run them: look again before their lease ends
                time.sleep(records.LEASE_S / 3)
    finally:
        close_old_connections()


def run_batch(
    batch_id: str, owner: str, chunk: int = CHUNK, pause_s: float = PAUSE_S
) -> Batch | None:
    """Run a batch whose lease `owner` holds until it ends, is cancelled or
    the lease is lost; returns it as last seen."""
    batch = records.load(batch_id)
    if batch is None:  # record expired or not ours: forget it
        records.forget(batch_id)
        return None
    failures = 0
    while batch.running:
        if records.cancel_requested(batch.id):
            finish(batch, CANCELLED)
            break
        began = time.monotonic()
        try:
            out = step(batch, chunk)
        except Exception as exc:
            if not recoverable(exc):  # ends this batch, not the runner
                log.exception("batch %s failed", batch.id)
                batch.last_error = f"{type(exc).__name__}: {exc}"[:300]
                finish(batch, FAILED)
                break
            failures += 1
            batch.last_error = f"Redis unavailable: {exc}"[:300]
            if failures >= MAX_FAILURES:  # let the lease lapse: resumed later
                log.warning("batch %s paused: %s", batch.id, batch.last_error)
                break
            time.sleep(min(0.1 * 2**failures, records.LEASE_S / 3))
            continue
        failures = 0
        batch.done += out.done
        batch.skipped += out.skipped
        batch.errors += out.errors
        batch.offset += out.stayed
        batch.cursor = out.cursor or batch.cursor
        batch.last_error = out.last_error or batch.last_error
        records.save(
            batch, "done", "skipped", "errors", "offset", "cursor", "last_error"
        )
        if out.finished:
            finish(batch, DONE)
            break
        if not records.renew(batch.id, owner):
            log.warning("batch %s was taken over by another process", batch.id)
            break
        time.sleep(max(pause_s, time.monotonic() - began) if pause_s else 0)
    return batch


def finish(batch: Batch, status: str) -> None:
    """End the batch and write its final counts into its audit row."""
    if status == CANCELLED:
        batch.cancel_by = records.cancel_requested(batch.id)
    records.end(batch, status, ops.now_ms())
    outcome = AuditEntry.OK if status == DONE and not batch.errors else AuditEntry.ERROR
    if status == CANCELLED:
        outcome = AuditEntry.OK
    AuditEntry.objects.filter(pk=batch.audit_id).update(
        outcome=outcome, detail=describe(batch)[:2000]
    )


def describe(batch: Batch) -> str:
    """The batch in words, as its audit row and the page say it."""
    what = f"{batch.verb} all {batch.state} jobs ({batch.total} at the start)"
    if batch.params:  # the verb's parameter, as given
        given = json.loads(batch.params).items()
        shown = ", ".join(f"{k}={json.dumps(v)}" for k, v in given)
        what = what.replace(" all ", f" ({shown}) all ", 1)
    counts = f"{batch.done} done, {batch.skipped} skipped, {batch.errors} error(s)"
    if batch.status == "running":
        text = f"{what}: running, {counts}"
    elif batch.status == CANCELLED:
        text = f"{what}: cancelled by {batch.cancel_by}, {counts}"
    else:
        text = f"{what}: {batch.status}, {counts}"
    if batch.last_error:
        text += f"; last error: {batch.last_error}"
    return f"{text} [batch {batch.id}]"
