"""Why is this job waiting, on the pages: the job page's block near the state
badge (sentence, code, links to pending children and the GPU page), the short
tag in the job list's rows, a long line's exact places and ranges, and a list
whose Redis reads stay the same from a queue of 60 jobs to one of 10,050."""

from __future__ import annotations

import html as htmllib

import pytest
import redis
from django.test import Client
from django.urls import reverse

from dashboard.console import reads
from dashboard.console.reads import waiting
from dashboard.shared.discovery import QueueRef
from queues import FlowProducer, Queue, ops
from tests.dashboard.helpers import job_url, make_active, queue_url, run_jobs
from tests.gpu_workers.waiting_helpers import (
    GiB,
    connected_worker,
    demo_job,
    gpu_worker,
    push_ids,
)
from tests.queues.transitions.helpers import move_to_active

pytestmark = pytest.mark.django_db


def _block(page: str) -> str:
    """The job page's waiting block ('' when there is none)."""
    start = page.find('id="waiting-reason"')
    if start < 0:
        return ""
    return page[start : page.index("</div>\n", start)]


def test_job_page_shows_the_reason_near_the_state_badge(
    dashboard_redis: str, admin_client: Client, q: Queue
) -> None:
    """A paused queue's job: the block names the code and says why, after
    the badge; an active job has no block."""
    job = q.add("job", {})
    q.pause()
    with connected_worker(dashboard_redis, q):
        page = admin_client.get(job_url(q, job.id)).content.decode()
    block = _block(page)
    assert 'data-waiting-code="queue_paused"' in block
    assert "The queue is paused" in block
    assert page.index('class="badge st-waiting"') < page.index('id="waiting-reason"')
    q.resume()
    move_to_active(q, now=ops.now_ms())
    assert q.get_job_state(job.id).value == "active"
    assert _block(admin_client.get(job_url(q, job.id)).content.decode()) == ""


def test_job_page_links_pending_children_and_the_gpu_page(
    dashboard_redis: str, admin_client: Client, qname: str, r: redis.Redis
) -> None:
    """A parent waiting for two children links both; a job waiting for VRAM
    links the GPU page; every link is a reversed URL."""
    node = FlowProducer(dashboard_redis).add(
        {
            "name": "parent",
            "queue_name": qname,
            "children": [
                {"name": f"c{i}", "queue_name": qname + "c"} for i in range(2)
            ],
        }
    )
    parent = Queue(qname, dashboard_redis)
    block = _block(admin_client.get(job_url(parent, node.job.id)).content.decode())
    assert 'data-waiting-code="waiting_for_children"' in block
    assert "2 of 2 pending" in block
    for child in node.children:
        url = reverse("bullpen:job", args=["bull", qname + "c", child.job.id])
        assert f'href="{url}"' in block
    gpu_worker(r, parent, budget=21 * GiB, committed=20 * GiB)
    job = demo_job(parent, "4GiB")
    block = _block(admin_client.get(job_url(parent, job.id)).content.decode())
    assert 'data-waiting-code="waiting_for_vram"' in block
    assert f'href="{reverse("bullpen:gpus")}"' in block
    parent.close()


def test_list_rows_carry_a_short_tag(
    dashboard_redis: str, admin_client: Client, q: Queue
) -> None:
    """Waiting, prioritized and delayed rows carry a tag whose title is the
    whole sentence; active rows carry none."""
    q.set_global_concurrency(1)
    make_active(q)
    q.add("w", {})
    q.add("p", {}, priority=3)
    q.add("d", {}, delay=60_000)
    with connected_worker(dashboard_redis, q):
        page = admin_client.get(queue_url(q)).content.decode()
    tags = [
        htmllib.unescape(part.split(">", 1)[1].split("<", 1)[0])
        for part in page.split('class="waiting-tag')[1:]
    ]
    assert sorted(tags) == ["concurrency 1/1", "concurrency 1/1", "delayed"]
    assert 'title="Global concurrency reached: 1 of 1 jobs running"' in page


def test_list_reads_stay_flat_from_60_to_10k_jobs(
    dashboard_redis: str, admin_client: Client, q: Queue, r: redis.Redis
) -> None:
    """The waiting tab's page costs the same Redis commands over 60 waiting
    jobs as over 10,050: the queue's facts are read once per list and each
    row's place in line is a bounded LPOS."""
    url = queue_url(q) + "?state=waiting"

    def commands() -> int:
        reads.reset()
        with connected_worker(dashboard_redis, q):
            admin_client.get(url)  # discovery, scripts and census warm
            r.config_resetstat()
            page = admin_client.get(url).content.decode()
        assert page.count('class="waiting-tag') == 25  # a page
        stats = r.info("commandstats")
        return sum(v["calls"] for k, v in stats.items() if k != "cmdstat_config")

    q.add_bulk([{"name": "job", "data": {"i": i}} for i in range(60)])
    small = commands()
    q.add_bulk([{"name": "job", "data": {"i": i}} for i in range(9_990)])
    assert commands() == small


def test_job_page_on_a_long_line(
    dashboard_redis: str, admin_client: Client, q: Queue, r: redis.Redis
) -> None:
    """On a line of 60,001 jobs the job page says exactly how many are ahead
    of the one just added, and a range of places and of times for one in the
    middle; their list tags say the same."""
    run_jobs(q, 10, target="completed", value=1)  # 2 jobs/min
    push_ids(r, q, 30_000, tag="a")
    middle = q.add("job", {})
    push_ids(r, q, 30_000, tag="b")
    newest = q.add("job", {})
    with connected_worker(dashboard_redis, q):
        back = _block(admin_client.get(job_url(q, newest.id)).content.decode())
        mid = _block(admin_client.get(job_url(q, middle.id)).content.decode())
        ref = QueueRef(q.prefix, q.name)
        found = waiting.reasons(ref, [(newest, "waiting"), (middle, "waiting")])
    assert 'data-waiting-code="queued"' in back
    assert (
        "60,001 jobs ahead of it; at 2.0 jobs/min it starts in about 20 d 20 h" in back
    )
    assert "Between 10,000 and 50,001 jobs ahead of it" in mid
    assert "it starts in between 3 and 18 d" in mid
    assert waiting.tag(found[newest.id]) == "60,001 ahead"
    assert waiting.tag(found[middle.id]) == "10,000–50,001 ahead"
