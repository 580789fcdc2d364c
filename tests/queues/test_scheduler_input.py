"""What the Python scheduler API refuses: options Bullpen stamps itself in a
template (a scheduler cannot bill a tenant), ids with control characters, and
numbers beyond what Node and the scripts hold exactly; `Queue.add(tenant=)`
stays the stamping path the HTTP API uses."""

from __future__ import annotations

import pytest

from queues import Queue
from queues.exceptions import InvalidJobOptions
from queues.options import STAMPED_OPTIONS, refuse_stamped
from queues.scheduler import LARGEST_NUMBER


@pytest.mark.parametrize("name", ["tenant", "repeat_job_key"])
def test_template_opts_cannot_hold_a_stamped_option(q: Queue, name: str) -> None:
    """upsert_job_scheduler refuses `tenant` in the template's opts, naming it,
    and stores nothing."""
    with pytest.raises(InvalidJobOptions, match=name):
        q.upsert_job_scheduler(
            "s", every_ms=5000, template={"opts": {"attempts": 2, name: "acme"}}
        )
    assert q.get_job_schedulers_count() == 0


def test_refuse_stamped_names_each_option() -> None:
    """One check for every path: it names what it refuses and passes the rest."""
    assert "tenant" in STAMPED_OPTIONS and "repeatJobKey" in STAMPED_OPTIONS
    refuse_stamped({"attempts": 3, "backoff": 10})
    with pytest.raises(InvalidJobOptions, match="repeatJobKey, tenant"):
        refuse_stamped({"tenant": "x", "repeatJobKey": "y", "attempts": 1})


def test_add_keeps_the_tenant_keyword(q: Queue) -> None:
    """The authenticated stamping path: `Queue.add(..., tenant=)` stores it."""
    job = q.add("render", {}, tenant="team-a")
    stored = q.get_job(job.id)
    assert stored is not None and stored.opts["tenant"] == "team-a"


@pytest.mark.parametrize("sid", ["a\nb", "cr\r", "tab\tx", "nul\x00x", "ls\u2028x"])
def test_ids_with_control_characters_are_refused(q: Queue, sid: str) -> None:
    """An id with a line break or other control character is refused."""
    with pytest.raises(ValueError, match="control characters"):
        q.upsert_job_scheduler(sid, every_ms=5000)
    assert q.get_job_schedulers_count() == 0


@pytest.mark.parametrize(
    "given",
    [
        {"every_ms": 10**30},
        {"every_ms": 5000, "limit": 10**30},
        {"every_ms": 5000, "offset_ms": LARGEST_NUMBER + 1},
        {"every_ms": 5000, "start_date": 10**30},
        {"cron": "0 * * * * *", "end_date": 10**30},
    ],
)
def test_numbers_beyond_range_are_refused(q: Queue, given: dict[str, int]) -> None:
    """A number beyond 2**53 - 1 is a ValueError naming its field."""
    field = next(k for k in given if k not in ("cron",) and given[k] != 5000)
    with pytest.raises(ValueError, match=field):
        q.upsert_job_scheduler("s", **given)  # type: ignore[arg-type]
    assert q.get_job_schedulers_count() == 0
