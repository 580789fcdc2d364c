"""GPU generation SaaS, end to end: `python -m examples.gpu_saas.run`.

A client POSTs generation requests to Bullpen's API; a supervisor runs them
on two simulated 24 GiB GPUs with progress; the backend's webhook receiver
records active -> progress -> completed for each (verifying signatures); a
request that keeps failing is retried with exponential backoff and finally
reported failed; the client also polls one job and follows another's SSE.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from examples.gpu_saas.client import BullpenClient
from examples.gpu_saas.receiver import WebhookReceiver
from examples.stack import Stack, wait_for

QUEUE = "generate"


def start(stack: Stack) -> dict[str, Any]:
    """Bring up the API, the dispatcher and the GPU supervisor."""
    token = stack.prepare_api(queues=QUEUE)
    stack.start_supervisor(
        [{"queue": QUEUE, "slots": 2}],
        gpus="sim:2x24GiB",
        handler_modules=["examples.gpu_saas.handlers"],
    )
    stack.start_dispatcher()
    stack.start_api()
    return token


def scenario(
    stack: Stack, token: dict[str, Any], timeout: float = 60.0
) -> dict[str, Any]:
    """Three good requests and a bad one; returns what the client saw."""
    client = BullpenClient(stack.api_url, token["token"])
    receiver = WebhookReceiver(token["webhook_secret"])
    try:
        good = [
            client.generate(
                QUEUE,
                f"a cat, style {i}",
                receiver.url,
                key=f"req-{i}",
                data={"steps": 6, "step_s": 0.12, "size": 512 + 256 * i},
            )
            for i in range(3)
        ]
        replay = client.generate(
            QUEUE,
            "a cat, style 0",
            receiver.url,
            key="req-0",
            data={"steps": 6, "step_s": 0.12, "size": 512},
        )
        bad = client.generate(
            QUEUE,
            "something the model refuses",
            receiver.url,
            key="req-bad",
            data={"steps": 2, "step_s": 0.05, "fail": True},
            attempts=3,
            backoff={"type": "exponential", "delay": 300},
        )
        sse: list[dict[str, Any]] = []
        follower = threading.Thread(
            target=lambda: sse.extend(
                client.follow(
                    good[1]["events_url"], ticket=good[1]["ticket"], timeout=timeout
                )
            )
        )
        follower.start()
        polled = client.wait(QUEUE, good[0]["id"], timeout)
        finished = [client.wait(QUEUE, job["id"], timeout) for job in good + [bad]]
        follower.join(timeout)
        wait_for(
            lambda: all(
                receiver.events(j["id"])[-1:] in (["completed"], ["failed"])
                for j in good + [bad]
            ),
            timeout,
            "the last webhooks",
        )
        resumed = list(
            client.follow(
                good[1]["events_url"], last_event_id=sse[2]["id"], timeout=timeout
            )
        )
        return {
            "good": good,
            "bad": bad,
            "replay": replay,
            "polled": polled,
            "finished": finished,
            "sse": sse,
            "resumed": resumed,
            "webhooks": {j["id"]: list(receiver.by_job[j["id"]]) for j in good + [bad]},
            "rejected": receiver.rejected,
        }
    finally:
        receiver.close()


def main() -> None:
    """Run the scenario on a throwaway Redis and print what happened."""
    from queues.devredis import RedisServer

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--redis-url", help="an existing Redis (default: start one)")
    args = parser.parse_args()
    server = None if args.redis_url else RedisServer().start()
    url = args.redis_url or server.url  # type: ignore[union-attr]
    with tempfile.TemporaryDirectory() as tmp:
        stack = Stack(url, Path(tmp), {"BULLPEN_WEBHOOK_PROGRESS_INTERVAL_MS": "200"})
        try:
            started = time.monotonic()
            result = scenario(stack, start(stack))
        finally:
            stack.close()
            if server is not None:
                server.stop()
    for job, events in result["webhooks"].items():
        print(
            f"job {job}: "
            + " -> ".join(
                e["event"] + (f"({e['progress']}%)" if e["event"] == "progress" else "")
                for e in events
            )
        )
    print(
        f"SSE of {result['good'][1]['id']}: "
        + ", ".join(m["event"] for m in result["sse"])
    )
    print(
        f"failed job: {result['finished'][-1]['failed_reason']!r} after "
        f"{result['finished'][-1]['attempts_made']} attempts"
    )
    print(f"done in {time.monotonic() - started:.1f}s")


if __name__ == "__main__":
    main()
