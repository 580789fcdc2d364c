"""Queue.find_groups (docs/groups.md): the groups whose id holds a text, as
the dashboard's search box lists them when no group has that exact id: the
first in get_groups' order (largest backlog first), how many matched, and
whether the whole index was searched."""

from __future__ import annotations

import pytest

from queues import Queue
from queues.exceptions import InvalidJobOptions
from queues.groups import find_groups
from queues.ops import now_ms


def add(q: Queue, backlogs: dict[str, int]) -> None:
    q.add_bulk(
        [
            {"name": "j", "data": {}, "opts": {"group": g}}
            for g, n in backlogs.items()
            for _ in range(n)
        ]
    )


def test_find_groups_by_part_of_their_id(q: Queue) -> None:
    """Every group whose id holds the text (case as given), in get_groups'
    order, `limit` of them with the count of all; bad input is refused."""
    add(q, {"acme/eu": 3, "beta": 5, "acme/us": 1, "xacme": 2, "ACME": 4})
    everyone = [g.id for g in q.get_groups(0, -1)]
    holding = [g for g in everyone if "acme" in g]
    assert len(holding) == 3
    found = q.find_groups("acme")
    assert [g.id for g in found.groups] == holding
    assert (found.matched, found.complete) == (3, True)
    assert found.groups[0].waiting == 3  # read like get_group
    first = q.find_groups("acme", limit=2)
    assert [g.id for g in first.groups] == holding[:2]
    assert (first.matched, first.complete) == (3, True)
    assert [g.id for g in q.find_groups("/").groups] == [
        g for g in everyone if "/" in g
    ]
    none = q.find_groups("zzz")
    assert (none.groups, none.matched, none.complete) == ([], 0, True)
    for bad in ("a*", "a?", "[a]", "a b", "", "x" * 101):
        with pytest.raises(InvalidJobOptions):
            q.find_groups(bad)
    with pytest.raises(ValueError):
        q.find_groups("acme", limit=0)


def test_a_search_cut_short_says_so(q: Queue) -> None:
    """On an index larger than one ZSCAN page, a search allowed one page
    answers what that page held and says it is not complete; the default
    allowance searches all 3,000."""
    add(q, {f"g{i:04d}": 1 for i in range(3000)})
    short = q.drive(find_groups(q.keys, "g", 5, now_ms(), calls=1))
    assert not short.complete and 0 < short.matched < 3000
    assert len(short.groups) == 5
    whole = q.find_groups("g", limit=5)
    assert (whole.matched, whole.complete) == (3000, True)
    assert [g.id for g in whole.groups] == [g.id for g in q.get_groups(0, 4)]
