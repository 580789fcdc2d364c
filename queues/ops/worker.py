"""A worker's transitions: claiming jobs and finishing them (with the claim
of the next ones), each one script call the worker sends exactly once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .requests import Eval, Op


def claim(
    claim_keys: Sequence[str], base: str, now: int, worker_opts: str, count: int
) -> Op[Any]:
    """Move up to `count` jobs to active under the worker's lock; returns
    move_to_active's reply: [flat id, token, fields triples, rate-limit ttl,
    next delayed due time]. `claim_keys`: QueueKeys.move_to_active_keys()."""
    return (yield Eval("move_to_active", claim_keys, (base, now, worker_opts, count)))


def finish(
    finish_keys: Sequence[str], base: str, now: int, worker_opts: str, entries: str
) -> Op[Any]:
    """Save finished jobs (`entries`: their JSON list) and claim the next ones
    as the worker opts' `fetch` says; returns move_to_finished's reply: [a code
    per entry, then as claim's]. `finish_keys`: QueueKeys.move_to_finished_keys()."""
    return (
        yield Eval("move_to_finished", finish_keys, (base, now, worker_opts, entries))
    )
