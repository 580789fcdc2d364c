"""Every page works under the Content-Security-Policy in Debian's Chromium:
the policy is sent, and no page (nor its htmx swaps and live updates)
reports a violation or an htmx eval refusal on the console."""

from __future__ import annotations

from typing import Any

from queues import Queue

from .conftest import Stack

#: What Chromium and htmx print when the policy blocks something.
VIOLATION_SIGNS = ("Content Security Policy", "Refused to", "evalDisallowed", "eval")


def _watch(page: Any) -> list[str]:
    """Console errors and warnings, and uncaught page errors, as they come."""
    seen: list[str] = []
    page.on(
        "console",
        lambda m: (
            seen.append(f"{m.type}: {m.text}")
            if m.type in ("error", "warning")
            else None
        ),
    )
    page.on("pageerror", lambda e: seen.append(f"pageerror: {e}"))
    return seen


def _visit(page: Any, url: str) -> None:
    response = page.goto(url)
    assert response is not None and response.status == 200, url
    policy = response.headers.get("content-security-policy", "")
    assert "script-src 'self'" in policy and "unsafe-eval" not in policy, url
    page.wait_for_load_state("networkidle")


def test_no_csp_violation_on_any_page(page: Any, browser: Any, stack: Stack) -> None:
    """Overview (with an htmx filter swap), queue, job (whose detail
    re-renders on the job's live events, without an eval'd trigger filter),
    GPUs, search, triage, audit and login: no violation anywhere."""
    seen = _watch(page)
    q = Queue("gpu", stack.redis_url)
    failed = q.add("demo", {"vram": "1GiB", "steps": 1, "step_s": 0.01, "fail": True})
    job = q.add("demo", {"vram": "1GiB", "steps": 1, "step_s": 0.01}, delay=3000)
    q.close()

    _visit(page, stack.url + "/")
    page.fill("input[name=q]", "gpu")  # htmx swaps the queue table
    page.wait_for_timeout(800)
    page.wait_for_load_state("networkidle")
    _visit(page, f"{stack.url}/queues/bull/gpu/")
    _visit(page, f"{stack.url}/queues/bull/gpu/jobs/{job.id}/")
    detail = page.locator("#job-detail")
    detail.get_by_text("held_bytes").wait_for(timeout=20_000)  # re-rendered live
    bar = page.locator(f'[data-live-progress="bull:gpu:{job.id}"] > span').first
    assert bar.evaluate("el => el.style.width") == "100%"  # bars.js, no style attr
    _visit(page, f"{stack.url}/queues/bull/gpu/jobs/{failed.id}/")
    _visit(page, stack.url + "/gpus/")
    _visit(page, stack.url + "/search/?q=demo")
    _visit(page, stack.url + "/triage/")
    _visit(page, f"{stack.url}/triage/bull/gpu/")
    _visit(page, stack.url + "/audit/")

    anonymous = browser.new_context()
    try:
        login = anonymous.new_page()
        seen_login = _watch(login)
        _visit(login, stack.url + "/login/")
        seen += seen_login
    finally:
        anonymous.close()
    blocked = [m for m in seen if any(sign in m for sign in VIOLATION_SIGNS)]
    assert not blocked
