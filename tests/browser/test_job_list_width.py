"""A queue's page in Debian's Chromium against the real stack: however long
a job's data or failure and a group's id, the job list and the groups table
fit their panels on a desktop and a 1024 px window, every row's actions on
screen (a long failure once widened the job list past its panel, its Remove
buttons cut off behind a scroll bar; a delayed job's four actions once ran
past it on a 1280 px screen), and the group's name in the charts'
legend stays inside its chart; on a phone the tables scroll inside their
panels and the page does not overflow. The overview's queue table fits
1024 px too."""

from __future__ import annotations

from typing import Any

from django.urls import reverse

from queues import Job, Queue
from tests.helpers import wait_until
from tests.queues.worker.helpers import worker_thread

from .conftest import Stack, shot

#: A failure as long as a real traceback's last line can be.
LONG = "CUDA error: an illegal memory access was encountered " + "x" * 300

FITS = """() => {
  const wider = sel => {
    const table = document.querySelector(sel);
    return table.scrollWidth - table.closest('.table-wrap').clientWidth;
  };
  const table = document.querySelector('#job-list table.jobs');
  const right = table.closest('.table-wrap').getBoundingClientRect().right;
  const cut = [...table.querySelectorAll('.row-actions')].filter(
    a => a.getBoundingClientRect().right > right + 1).length;
  // Rows of three actions or fewer whose actions take more than one line.
  const tops = a => new Set([...a.children].map(
    c => Math.round(c.getBoundingClientRect().top))).size;
  const stacked = [...table.querySelectorAll('.row-actions')].filter(
    a => a.children.length <= 3 && tops(a) > 1).length;
  const legends = [...document.querySelectorAll('.chart .u-legend .u-label')];
  const outside = legends.filter(l => l.getBoundingClientRect().right >
    l.closest('.chart').getBoundingClientRect().right + 1).length;
  return {jobs: wider('#job-list table.jobs'), groups: wider('table.groups'),
          cut: cut, stacked: stacked, legends: legends.length, outside: outside,
          page: document.documentElement.scrollWidth - innerWidth};
}"""


def _fail(job: Job[Any]) -> None:
    raise RuntimeError(LONG)


def test_long_failures_and_data_never_push_the_row_actions_off_screen(
    page: Any, stack: Stack
) -> None:
    q = Queue("wide-rows", stack.redis_url)
    failed = q.add("render", {"prompt": "y" * 400})
    with worker_thread(q.name, _fail, stack.redis_url):
        wait_until(lambda: q.get_job_state(failed.id).value == "failed", 10)
    q.add("render", {"prompt": "z" * 400})  # waiting: its own actions
    # Delayed: the most actions a row has (Promote, Change priority,
    # Duplicate, Remove).
    q.add("render", {"prompt": "d" * 400}, delay=3_600_000)
    group = "tenant-" + "g" * 60
    q.add("render", {"prompt": "w"}, group=group)
    page.goto(stack.url + reverse("bullpen:queue", args=[q.prefix, q.name]))
    page.locator("#job-list tr[data-job]").nth(3).wait_for()
    legend = page.locator(".chart .u-legend .u-label", has_text="tenant-")
    legend.wait_for()
    for label, width, height in (("desktop", 1280, 900), ("laptop", 1024, 768)):
        page.set_viewport_size({"width": width, "height": height})
        found = page.evaluate(FITS)
        assert found["jobs"] <= 1 and found["groups"] <= 1, (label, found)
        assert found["cut"] == 0 and found["page"] <= 0, (label, found)
        assert found["legends"] > 0 and found["outside"] == 0, (label, found)
        if label == "desktop":  # (room for most rows' three actions on a line)
            assert found["stacked"] == 0, found
        shot(page, f"job-list-{label}")
    assert legend.get_attribute("title") == group  # whole on hover
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate(FITS)["page"] <= 0
    shot(page, "job-list-phone")
    page.set_viewport_size({"width": 1024, "height": 768})
    page.goto(stack.url + reverse("bullpen:overview"))
    table = page.locator("table.queues")
    table.wait_for()
    over = table.evaluate("t => t.scrollWidth - t.closest('.table-wrap').clientWidth")
    assert over <= 1, over  # the overview's columns fit a 1024 px window too
    lines = table.locator("a.clip", has_text=f"bull:{q.name}").evaluate(
        "a => a.getBoundingClientRect().height"
        " / parseFloat(getComputedStyle(a).lineHeight)"
    )
    assert lines < 1.5, lines  # the queue's name on one line, not broken in two
    shot(page, "overview-laptop")
    q.obliterate(force=True)
    q.close()
