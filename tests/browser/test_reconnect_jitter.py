"""live.js's reconnect backoff, in Debian's Chromium: full jitter (pages cut
off together do not come back together), doubling up to a cap, and a page
that reconnects does so with the backoff live.js exposes."""

from __future__ import annotations

from typing import Any

from .conftest import Stack

#: Closes the page's live socket; resolves once live.js has handled the close.
CLOSE = """() => new Promise(done => {
  const socket = window.bullpenLive.socket;
  socket.addEventListener("close", () => done());
  socket.close();
})"""
#: attempt -> the largest wait live.js may choose (ms): 1 s doubling, 30 s cap.
CEILINGS_MS = {0: 1_000, 1: 2_000, 2: 4_000, 4: 16_000, 5: 30_000, 40: 30_000}


def test_backoff_is_capped_exponential_with_full_jitter(
    page: Any, stack: Stack
) -> None:
    """The pure backoff function: uniform in 0..1 s at first, its ceiling
    doubling per attempt up to 30 s, never the same wait for every page."""
    page.goto(stack.url + "/")
    page.wait_for_selector("body[data-live-status=open]")
    # Playwright's evaluate goes through the DevTools protocol, which the
    # page's CSP (no eval) does not govern.
    highest = page.evaluate(
        "attempts => attempts.map(a => window.bullpenLiveBackoff(a, () => 0.999999))",
        list(CEILINGS_MS),
    )
    assert highest == [c - 1 for c in CEILINGS_MS.values()]
    lowest = page.evaluate(
        "attempts => attempts.map(a => window.bullpenLiveBackoff(a, () => 0))",
        list(CEILINGS_MS),
    )
    assert lowest == [0] * len(CEILINGS_MS)
    first = page.evaluate(
        "() => Array.from({length: 400}, () => window.bullpenLiveBackoff(0))"
    )
    assert all(0 <= d < 1_000 for d in first)
    assert len(set(first)) > 200, "the first retry's wait has no jitter"
    assert min(first) < 150 and max(first) > 850, "not spread over 0..1 s"


def test_pages_cut_off_together_reconnect_apart(page: Any, stack: Stack) -> None:
    """Three pages whose sockets close at the same moment each wait their own
    random time (under 1 s, the first retry) and all come back; a socket
    that drops again at once waits on the next, doubled, attempt."""
    pages = [page, *(page.context.new_page() for _ in range(2))]
    for pg in pages:
        pg.goto(stack.url + "/")
        pg.wait_for_selector("body[data-live-status=open]")
    for pg in pages:
        pg.evaluate(CLOSE)
    delays = []
    for pg in pages:
        pg.wait_for_selector("body[data-live-status=open]", timeout=10_000)
        delays.append(pg.evaluate("() => window.bullpenLive.lastDelay"))
    assert all(0 <= d < 1_000 for d in delays), delays
    assert len(set(delays)) > 1, f"every page waited the same {delays[0]} ms"
    # Open for less than STABLE_MS: the backoff does not start over.
    pages[0].evaluate(CLOSE)
    pages[0].wait_for_selector("body[data-live-status=open]", timeout=10_000)
    assert pages[0].evaluate("() => window.bullpenLive.attempt") == 2
    assert 0 <= pages[0].evaluate("() => window.bullpenLive.lastDelay") < 2_000
