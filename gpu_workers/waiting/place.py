"""A job's place in line from what Redis answered: exact, or a range.

BullMQ LPUSHes a new job at the head of `wait` and workers take from the
tail (a LIFO job is RPUSHed there, at the front of the line). Two bounded
scans find a job within `scan` of either end: `LPOS wait id RANK -1 MAXLEN
scan` from the tail (the front of the line), `LPOS … RANK 1 MAXLEN scan` from
the head (the back). LPOS answers the index from the head either way, so the
jobs ahead are `LLEN - 1 - index`. A job found by neither is at least `scan`
from the front and at most `LLEN - 1 - scan`.

These replies come from one pipeline, which is not a snapshot: another
client's command may run between LLEN and an LPOS (a MULTI would cost a
round trip of its own, see reads.py). So every number is clamped to the
length read: never negative, never past the last place, and the range's
least never above its most.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Place:
    """Jobs ahead of a job: exact when both bounds are equal."""

    ahead_at_least: int
    ahead_at_most: int

    @property
    def exact(self) -> int | None:
        """The number of jobs ahead when known exactly, else None."""
        return (
            self.ahead_at_least if self.ahead_at_least == self.ahead_at_most else None
        )


def wait_place(
    length: int | None, from_front: int | None, from_back: int | None, scan: int
) -> Place | None:
    """A waiting job's place from LLEN and the two LPOS replies (indexes from
    the head; None when not found); None when it is not in the list any more
    (both scans covered it whole) or the length is unknown."""
    if length is None:
        return None
    last = max(length - 1, 0)
    index = from_front if from_front is not None else from_back
    if index is not None:
        ahead = min(max(length - 1 - index, 0), last)
        return Place(ahead, ahead)
    if length <= 2 * scan:
        return None  # the scans met: the job left `wait` since its state was read
    least = min(scan, last)
    return Place(least, max(length - 1 - scan, least))


def prioritized_place(waiting: int | None, rank: int | None) -> Place | None:
    """A prioritized job's place: BullMQ takes every `wait` job first, then
    prioritized ones by score, so the whole wait list and its ZRANK are ahead;
    both are exact at any depth. None when it left the prioritized set."""
    if rank is None or waiting is None:
        return None
    ahead = max(waiting, 0) + max(rank, 0)
    return Place(ahead, ahead)
