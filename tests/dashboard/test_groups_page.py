"""Groups on the dashboard (docs/groups.md): the queue page's panel, the page
of every group, a group's page, the job page's link to its group, and the
audited, permission-checked group actions with their input validated."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from dashboard.console.models import AuditEntry
from queues import Queue
from queues.group_types import GroupSettings
from tests.dashboard.conftest import client_for, user_in
from tests.dashboard.helpers import hx_post, job_url, queue_url
from tests.queues.groups.helpers import finish_grouped
from tests.queues.transitions.helpers import claimed, move_to_active

pytestmark = pytest.mark.django_db


def add_groups(q: Queue, backlogs: dict[str, int]) -> list[str]:
    """Add `n` jobs to each group (in one bulk); their ids, in order."""
    jobs = q.add_bulk(
        [
            {"name": "job", "data": {"g": g, "i": i}, "opts": {"group": g}}
            for g, n in backlogs.items()
            for i in range(n)
        ]
    )
    return [j.id for j in jobs]


def group_url(q: Queue, group_id: str, verb: str | None = None) -> str:
    """A group's page, or one of its actions."""
    if verb:
        return reverse("bullpen:group-action", args=[q.prefix, q.name, group_id, verb])
    return reverse("bullpen:group", args=[q.prefix, q.name, group_id])


def groups_url(q: Queue) -> str:
    """The page of every group of a queue."""
    return reverse("bullpen:groups", args=[q.prefix, q.name])


def shown_groups(html: str) -> list[str]:
    """The groups of a page's group rows, in order."""
    return re.findall(r'<tr data-group="([^"]+)"', html)


def audit() -> list[tuple[str, str, str]]:
    """(target, action, outcome) of every audit row, oldest first."""
    return list(
        AuditEntry.objects.order_by("id").values_list("target", "action", "outcome")
    )


def test_panel_lists_summary_and_largest_backlogs(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """The queue page has a Groups panel with the summary and the groups by
    backlog, each linked to its page; a queue without groups has none."""
    q = Queue(qname, dashboard_redis)
    ids = add_groups(q, {"small": 1, "big": 4, "mid/sub-1": 2})
    q.pause_group("small")
    html = admin_client.get(queue_url(q)).content.decode()
    listed = re.findall(r'<tr data-job="[^"]*:([^":]+)"', html)
    assert sorted(listed) == sorted(ids)  # the waiting tab lists grouped jobs
    assert 'id="groups"' in html
    assert shown_groups(html) == ["big", "mid/sub-1", "small"]
    assert '<strong data-summary="groups">3</strong>' in html
    assert '<strong data-summary="waiting">7</strong>' in html
    assert '<strong data-summary="paused">1</strong>' in html
    assert f'href="{group_url(q, "mid/sub-1")}"' in html
    assert re.search(r'data-group="small" data-group-state="paused"', html)
    assert f'href="{groups_url(q)}"' in html
    assert 'id="grouped-jobs-note"' in html
    plain = Queue(qname + "-plain", dashboard_redis)
    plain.add("job", {})
    assert 'id="groups"' not in admin_client.get(queue_url(plain)).content.decode()


def test_a_group_at_its_concurrency_says_so(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """A group whose jobs wait because as many of them run as its concurrency
    allows reads "at concurrency" (n of n running), as its jobs' waiting
    reason says, not "taking turns"; a group without a cap still takes turns,
    and so does the capped one once a slot is free again."""
    q = Queue(qname, dashboard_redis)
    add_groups(q, {"capped": 3, "free": 3})
    q.set_group("capped", concurrency=1)
    taken = claimed(move_to_active(q, count=2))  # one of each
    assert sorted(t[2]["gid"] for t in taken) == ["capped", "free"]
    for url in (queue_url(q), groups_url(q), group_url(q, "capped")):
        html = admin_client.get(url).content.decode()
        assert ">at concurrency</span>" in html, url
        assert "1 of 1 running" in html, url
    html = admin_client.get(groups_url(q)).content.decode()
    assert re.search(r'data-group="capped" data-group-state="at-concurrency"', html)
    assert re.search(r'data-group="free" data-group-state="ready"', html)
    finish_grouped(q, [t for t in taken if t[2]["gid"] == "capped"])
    html = admin_client.get(groups_url(q)).content.decode()
    assert re.search(r'data-group="capped" data-group-state="ready"', html)
    assert ">at concurrency</span>" not in html


def test_a_group_whose_jobs_run_stays_listed_once_forgotten(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """A group with nothing waiting leaves the groups' index once the turn
    moves past it (docs/groups.md, *Forgetting groups*), its jobs maybe still
    running: the panel and the page of every group still list it, counted,
    as "running", until they end (it used to vanish while its job ran: the
    rows' active jobs fell short of the summary's)."""
    q = Queue(qname, dashboard_redis)
    add_groups(q, {"solo": 1, "busy": 3})
    taken = claimed(move_to_active(q, count=2))  # turn 1: solo's job, busy's first
    assert len(claimed(move_to_active(q))) == 1  # turn 2: busy; solo is forgotten
    assert q.client.zscore(q.keys.groups_index, "solo") is None
    for url in (queue_url(q), groups_url(q)):
        html = admin_client.get(url).content.decode()
        assert shown_groups(html) == ["busy", "solo"], url
        row = html[html.index('<tr data-group="solo"') :]
        row = row[: row.index("</tr>")]
        assert ">running</span>" in row, row
    html = admin_client.get(queue_url(q)).content.decode()
    assert '<strong data-summary="groups">2</strong>' in html
    assert '<strong data-summary="active">3</strong>' in html
    finish_grouped(q, [t for t in taken if t[2]["gid"] == "solo"])
    assert shown_groups(admin_client.get(groups_url(q)).content.decode()) == ["busy"]


def test_job_list_rows_link_each_jobs_group(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """In the job lists a grouped job's row names its group, linked to the
    group's page; an ungrouped job's row, and one whose options name no
    valid group id (another client's), name none."""
    q = Queue(qname, dashboard_redis)
    grouped = add_groups(q, {"acme": 2, "mid/sub-1": 1})
    plain = q.add("job", {}).id
    odd = q.add("job", {}).id
    q.client.hset(f"{q.prefix}:{q.name}:{odd}", "opts", '{"group": {"id": "a:b"}}')
    html = admin_client.get(queue_url(q) + "?state=waiting").content.decode()
    rows = dict(re.findall(r'<tr data-job="[^"]*:([^":]+)">(.*?)</tr>', html, re.S))
    assert set(rows) == {*grouped, plain, odd}
    tag = re.compile(r'<a class="group-tag small" href="([^"]+)"')
    for job_id, group in zip(grouped, ["acme", "acme", "mid/sub-1"], strict=True):
        assert tag.findall(rows[job_id]) == [group_url(q, group)]
    assert tag.findall(rows[plain]) == [] and tag.findall(rows[odd]) == []


def test_group_page_lists_waiting_jobs_in_claim_order(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """A group's page shows its settings and its waiting jobs in the order
    `get_group_jobs` gives, each linked with its priority; the job page
    links to its group."""
    q = Queue(qname, dashboard_redis)
    add_groups(q, {"acme": 3, "other": 1})
    q.add("urgent", {}, group="acme", priority=1)
    q.set_group("acme", weight=3, concurrency=2)
    order = [j.id for j in q.get_group_jobs("acme", 0, 99)]
    html = admin_client.get(group_url(q, "acme")).content.decode()
    assert re.findall(r'<tr data-job="([^"]+)"', html) == order
    for job_id in order:
        assert f'href="{job_url(q, job_id)}"' in html
    # The priority shows why "urgent" waits behind the plain jobs (last).
    priorities = re.findall(
        r'<tr data-job="[^"]+">(?:<td.*?</td>){3}<td class="num">(.*?)</td>', html
    )
    assert priorities == ['<span class="muted">none</span>'] * 3 + ["1"], priorities
    assert "<dt>weight</dt><dd>3" in html and "<dt>concurrency</dt><dd>2" in html
    job_html = admin_client.get(job_url(q, order[0])).content.decode()
    assert f'id="job-group" href="{group_url(q, "acme")}"' in job_html


def test_unknown_or_invalid_group_is_the_sites_404(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """A group the queue does not have, an id no group may have, and an
    unknown queue answer our 404 page; an action on them writes nothing."""
    q = Queue(qname, dashboard_redis)
    add_groups(q, {"acme": 1})
    for url in (
        group_url(q, "nope"),
        group_url(q, "a:b"),
        group_url(q, "x" * 101),
        reverse("bullpen:groups", args=["bull", qname + "-missing"]),
    ):
        response = admin_client.get(url)
        assert response.status_code == 404, url
        assert b'id="not-found"' in response.content, url
    response = hx_post(admin_client, group_url(q, "nope", "pause"))
    assert response.status_code == 404
    assert q.get_group("nope") is None
    assert hx_post(admin_client, group_url(q, "acme", "no-such")).status_code == 404


def test_search_finds_a_group_by_id(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """The search box goes to the group's page; an unknown or invalid id
    stays on the list saying so, escaped."""
    q = Queue(qname, dashboard_redis)
    add_groups(q, {"acme@eu": 1})
    found = admin_client.get(groups_url(q), {"id": "acme@eu"})
    assert found.status_code == 302 and found["Location"] == group_url(q, "acme@eu")
    missing = admin_client.get(groups_url(q), {"id": "nope"})
    assert missing.status_code == 404
    said = missing.content.decode()
    assert f"bull:{qname} has no group &#x27;nope&#x27;, nor one whose id" in said
    odd = admin_client.get(groups_url(q), {"id": "<script>x</script>"})
    assert odd.status_code == 404
    assert b"<script>x" not in odd.content and b"is not a group id" in odd.content


def test_search_lists_the_groups_whose_id_holds_the_text(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """Text that is no group's whole id lists the groups whose id holds it,
    largest backlog first (as the page of every group), with their actions
    and how many matched; no pager."""
    q = Queue(qname, dashboard_redis)
    add_groups(q, {"acme@eu": 1, "acme@us": 3, "beta": 2, "old-acme": 2})
    found = admin_client.get(groups_url(q), {"id": "acme"})
    assert found.status_code == 200
    html = found.content.decode()
    assert shown_groups(html) == ["acme@us", "old-acme", "acme@eu"]
    assert shown_groups(html) == [g.id for g in q.get_groups(0, -1) if "acme" in g.id]
    note = html[html.index('id="group-matches"') :]
    note = note[: note.index("</p>")]
    assert "3 groups whose id holds <code>acme</code>" in note, note
    assert "largest backlogs" not in note  # (all three are listed)
    assert f'action="{group_url(q, "old-acme", "pause")}"' in html
    # An action goes back to this search; no pager.
    assert f'name="next" value="{groups_url(q)}?id=acme"' in html
    assert 'aria-label="Pages"' not in html


def test_pause_and_resume_are_audited_and_need_operate(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """A viewer is refused (audited as denied); an operator pauses and
    resumes the group (each audited), and the page goes back where it was."""
    q = Queue(qname, dashboard_redis)
    add_groups(q, {"acme": 2})
    viewer = client_for(user_in("viewer"))
    assert hx_post(viewer, group_url(q, "acme", "pause")).status_code == 403
    assert not q.get_group("acme").paused
    operator = client_for(user_in("operator"))
    response = hx_post(operator, group_url(q, "acme", "pause"), {"next": queue_url(q)})
    assert response.status_code == 200 and response["HX-Redirect"] == queue_url(q)
    assert q.get_group("acme").paused
    response = operator.post(group_url(q, "acme", "resume"))
    assert response.status_code == 303
    assert response["Location"] == group_url(q, "acme")
    assert not q.get_group("acme").paused
    target = f"bull:{qname}:acme"
    assert audit() == [
        (target, "group.pause", "denied"),
        (target, "group.pause", "ok"),
        (target, "group.resume", "ok"),
    ]


def test_release_ends_a_hold(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """A held group shows its hold with the reason; Release ends it, and
    releasing a group not held is refused (400, audited)."""
    q = Queue(qname, dashboard_redis)
    add_groups(q, {"acme": 1})
    q.hold_group("acme", "quota")
    html = admin_client.get(group_url(q, "acme")).content.decode()
    assert "held: quota" in html
    assert hx_post(admin_client, group_url(q, "acme", "release")).status_code == 200
    assert not q.get_group("acme").hold
    assert hx_post(admin_client, group_url(q, "acme", "release")).status_code == 400
    assert [a for _, a, _ in audit()] == ["group.release", "group.release"]


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"weight": "0"}, "weight"),
        ({"weight": "x"}, "weight"),
        ({"concurrency": "-1"}, "concurrency"),
        ({"rate_max": "5"}, "or neither"),
        ({"rate_duration_ms": "1000"}, "or neither"),
    ],
)
def test_settings_input_is_validated(
    dashboard_redis: str, admin_client: Client, qname: str, data: Any, problem: str
) -> None:
    """Bad limits are refused with what is wrong (400, audited as an error),
    and the group keeps its settings."""
    q = Queue(qname, dashboard_redis)
    add_groups(q, {"acme": 1})
    response = hx_post(admin_client, group_url(q, "acme", "settings"), data)
    assert response.status_code == 400
    assert problem in response.content.decode()
    assert q.get_group("acme").weight == 1
    assert audit() == [(f"bull:{qname}:acme", "group.settings", "error")]


def test_settings_set_and_clear_limits_and_need_scale(
    dashboard_redis: str, qname: str
) -> None:
    """An operator may not change limits (scale); a scaler sets weight,
    concurrency and rate, and blank fields clear them again."""
    q = Queue(qname, dashboard_redis)
    add_groups(q, {"acme": 1})
    url = group_url(q, "acme", "settings")
    limits = {
        "weight": "3",
        "concurrency": "2",
        "rate_max": "10",
        "rate_duration_ms": "1000",
    }
    operator = client_for(user_in("operator"))
    assert hx_post(operator, url, limits).status_code == 403
    scaler = client_for(user_in("scaler"))
    assert hx_post(scaler, url, limits).status_code == 200
    g = q.get_group("acme")
    assert (g.weight, g.concurrency, g.rate_max, g.rate_duration_ms) == (
        3,
        2,
        10,
        1000,
    )
    assert hx_post(scaler, url, {}).status_code == 200
    g = q.get_group("acme")
    assert (g.weight, g.concurrency, g.rate_max) == (1, None, None)
    assert [(a, o) for _, a, o in audit()] == [
        ("group.settings", "denied"),
        ("group.settings", "ok"),
        ("group.settings", "ok"),
    ]


def test_read_only_queue_offers_no_group_action(
    dashboard_redis: str, admin_client: Client, qname: str, settings: Any
) -> None:
    """On a read-only queue the panel has no actions and a posted one is refused."""
    settings.BULLPEN_READ_ONLY_QUEUES = [qname]
    q = Queue(qname, dashboard_redis)
    add_groups(q, {"acme": 1})
    html = admin_client.get(queue_url(q)).content.decode()
    assert 'data-group="acme"' in html and "data-group-action" not in html
    assert hx_post(admin_client, group_url(q, "acme", "pause")).status_code == 403
    assert not q.get_group("acme").paused


def test_ten_thousand_groups_render_a_page(
    dashboard_redis: str, admin_client: Client, qname: str, settings: Any
) -> None:
    """With 10,000 groups the queue page lists the 20 largest backlogs and
    the groups page one page of them, the last page the rest."""
    settings.BULLPEN_PAGE_SIZE = 25
    q = Queue(qname, dashboard_redis)
    backlogs = {f"g{i:05d}": 1 for i in range(10_000)}
    backlogs.update({"top-a": 5, "top-b": 4})
    add_groups(q, backlogs)
    html = admin_client.get(queue_url(q)).content.decode()
    rows = shown_groups(html)
    assert len(rows) == 20 and rows[:2] == ["top-a", "top-b"]
    assert '<strong data-summary="groups">10002</strong>' in html
    first = admin_client.get(groups_url(q)).content.decode()
    assert len(shown_groups(first)) == 25 and "page 1 of 401" in first
    last = admin_client.get(groups_url(q), {"page": 401}).content.decode()
    assert len(shown_groups(last)) == 2
    beyond = admin_client.get(groups_url(q), {"page": 9_999}).content.decode()
    assert "page 401 of 401" in beyond


def test_group_defaults_are_shown_set_from_the_panel_and_audited(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """The panel shows the defaults every group uses; the scale action sets
    and clears them (audited), and a bad pair of rate fields changes nothing."""
    q = Queue(qname, dashboard_redis)
    add_groups(q, {"a": 1})
    url = reverse("bullpen:queue-action", args=[q.prefix, q.name, "group-defaults"])
    html = admin_client.get(queue_url(q)).content.decode()
    assert 'id="group-defaults"' in html and "concurrency none" in html
    data = {"weight": "", "concurrency": "3", "rate_max": "10", "rate_duration_ms": ""}
    assert hx_post(admin_client, url, data).status_code == 400
    assert q.get_group_defaults() == GroupSettings()
    data["rate_duration_ms"] = "1000"
    assert hx_post(admin_client, url, data).status_code == 200
    assert q.get_group_defaults() == GroupSettings(None, 3, 10, 1000)
    assert q.get_group("a").concurrency == 3  # type: ignore[union-attr]
    html = admin_client.get(queue_url(q)).content.decode()
    assert "concurrency 3" in html and "rate 10 per 1000 ms" in html
    empty = {"weight": "", "concurrency": "", "rate_max": "", "rate_duration_ms": ""}
    assert hx_post(admin_client, url, empty).status_code == 200
    assert q.get_group_defaults() == GroupSettings()
    outcomes = [o for _, a, o in audit() if a == "group.defaults"]
    assert outcomes[0] != "ok" and outcomes[1:] == ["ok", "ok"]
