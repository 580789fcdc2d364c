"""Claim-time placement (gpu_workers/placement.py): `choose`'s rules, and a
`Placement` against real queues: it fronts the job that suits this GPU and
leaves BullMQ's layout as it was (an ordinary worker then claims that job),
holds when none suits, never reads a huge payload, takes a job whose data is
not JSON as one without a model, and publishes this GPU in the warm / open
zsets."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
import redis
import redis.asyncio as aredis

from gpu_workers.keys import BullpenKeys
from gpu_workers.placement import (
    DATA_CAP_BYTES,
    HOLD_MAX_S,
    HOLD_MIN_S,
    OPEN,
    WARM,
    Candidate,
    Choice,
    Placement,
    choose,
)
from queues import AsyncWorker, Job, Queue
from queues.keys import QueueKeys
from tests.gpu_workers.placement_helpers import (
    GPU,
    OTHER,
    Recorder,
    View,
    client_for,
    node_style_job,
    registry,
    wait_ids,
)

NOW, BOUND, COLD = 1_000_000, 60_000, 2_000


def job(job_id: str, model: str | None, waited_ms: int | None = 0) -> Candidate:
    """A candidate that has waited `waited_ms` at NOW (None: unknown)."""
    return Candidate(job_id, model, None if waited_ms is None else NOW - waited_ms)


def decide(
    jobs: list[Candidate],
    view: View,
    open_there: frozenset[str] = frozenset(),
    warm_there: frozenset[str] = frozenset(),
) -> Choice:
    def elsewhere(model: str) -> str:
        return OPEN if model in open_there else WARM if model in warm_there else ""

    return choose(jobs, view, elsewhere, NOW, BOUND, COLD)


F = frozenset
# (what, candidates, view, open elsewhere, the id taken or None: a hold)
RULES: list[tuple[str, list[Candidate], View, frozenset[str], str | None]] = [
    ("no model", [job("a", None)], View(), F(), "a"),
    ("resident", [job("a", "m")], View(here=F({"m"})), F(), "a"),
    ("resident beats open", [job("a", "m")], View(here=F({"m"})), F({"m"}), "a"),
    ("aged beats backoff", [job("a", "m", BOUND)], View(backoff=F({"m"})), F(), "a"),
    ("aged beats open", [job("a", "m", BOUND)], View(), F({"m"}), "a"),
    ("backing off", [job("a", "m")], View(backoff=F({"m"}), room=F({"m"})), F(), None),
    ("open elsewhere", [job("a", "m")], View(want=F({"m"})), F({"m"}), None),
    ("wanted", [job("a", "m")], View(want=F({"m"})), F(), "a"),
    ("loadable", [job("a", "m")], View(room=F({"m"})), F(), "a"),
    ("cold hold passed", [job("a", "m", COLD)], View(), F(), "a"),
    ("cold, young, no room", [job("a", "m", COLD - 1)], View(), F(), None),
    ("unknown age = aged", [job("a", "m", None)], View(), F({"m"}), "a"),
    ("first that suits", [job("a", "x"), job("b", "m")], View(here=F({"m"})), F(), "b"),
    ("claim order", [job("a", None), job("b", "m")], View(here=F({"m"})), F(), "a"),
    ("open, next", [job("a", "m"), job("b", "n")], View(room=F({"n"})), F({"m"}), "b"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("jobs", "view", "open_there", "taken"),
    [pytest.param(*row[1:], id=row[0]) for row in RULES],
)
def test_choose_rules(
    jobs: list[Candidate], view: View, open_there: frozenset[str], taken: str | None
) -> None:
    choice = decide(jobs, view, open_there)
    assert choice.job_id == taken, choice
    if taken is None:
        assert HOLD_MIN_S <= choice.hold_s <= HOLD_MAX_S and choice.index == -1
    else:
        assert choice.hold_s == 0 and jobs[choice.index].job_id == taken


def test_a_model_warm_on_a_busy_gpu_waits_a_load_time_for_it() -> None:
    """A job whose model is resident on another GPU with every slot busy is
    left to it until it has waited as long as loading the model here takes
    (at least the cold hold), even with room here; then taken here. A
    model warm nowhere loads here at once where there is room."""
    view = View(room=F({"m", "n"}), load_s={"m": 5.0})
    young = decide([job("a", "m", 4_900)], view, warm_there=F({"m"}))
    assert young.job_id is None and "1 warm elsewhere" in young.reason
    assert young.hold_s == pytest.approx(0.1)
    aged = decide([job("a", "m", 5_000)], view, warm_there=F({"m"}))
    assert aged.job_id == "a" and "waited a load time" in aged.reason
    quick = View(room=F({"m"}), load_s={"m": 0.5})  # shorter than the cold hold
    assert decide([job("a", "m", COLD - 1)], quick, warm_there=F({"m"})).job_id is None
    assert decide([job("a", "m", COLD)], quick, warm_there=F({"m"})).job_id == "a"
    assert decide([job("a", "n")], view).job_id == "a"  # warm nowhere, room here
    wanted = View(want=F({"m"}), load_s={"m": 5.0})
    assert decide([job("a", "m")], wanted, warm_there=F({"m"})).job_id == "a"


def test_holds_last_until_the_earliest_threshold_within_bounds() -> None:
    """A hold lasts until the first candidate reaches its cold hold or the
    age bound, never below 50 ms nor above 1 s; nothing waiting: no hold."""
    cold = View()
    assert decide([job("a", "m", COLD - 1)], cold).hold_s == HOLD_MIN_S
    assert decide([job("a", "m", COLD - 500)], cold).hold_s == pytest.approx(0.5)
    both = [job("a", "m", COLD - 900), job("b", "m", COLD - 300)]
    assert decide(both, cold).hold_s == pytest.approx(0.3)
    # Skipped for being open elsewhere: only the age bound will take it.
    there = decide([job("a", "m", BOUND - 700)], cold, F({"m"}))
    assert there.hold_s == pytest.approx(0.7) and "open elsewhere" in there.reason
    assert decide([job("a", "m", 0)], cold, F({"m"})).hold_s == HOLD_MAX_S
    assert decide([], cold) == Choice(None, 0.0, "nothing waiting")


# --- against a real queue ---------------------------------------------------------
def placement(
    client: Any, keys: QueueKeys, view: View, model_for: Any = None, scan: int = 16
) -> Placement:
    return Placement(
        client,
        keys,
        BullpenKeys(),
        GPU,
        view,
        model_for or registry().model_for,
        age_bound_s=BOUND / 1000,
        cold_hold_s=COLD / 1000,
        scan=scan,
    )


COUNTS = ("waiting", "active", "completed", "failed", "delayed", "prioritized")


def test_fronts_the_warm_job_and_an_ordinary_worker_claims_it(
    redis_url: str, qname: str, r: redis.Redis
) -> None:
    """Waiting m1, m2 (a Node-style `gen` job naming m2 in its data), m3, a
    plain job; m2 resident here: the Node-style job goes to the head, the
    counts stay, and an ordinary AsyncWorker claims it first."""
    with Queue(qname, redis_url) as q:
        first = q.add("m1", {}).id
        node_style_job(r, q, "node-1", "gen", json.dumps({"model": "m2"}))
        q.add("m3", {})
        q.add("plain", {})
        before = q.get_counts(*COUNTS)
        order = wait_ids(r, q)
        assert order[:2] == [first, "node-1"]

        async def main() -> tuple[float, list[str]]:
            client = await client_for(redis_url)
            p = placement(client, q.keys, View(here=F({"m2"})))
            hold = await p.before_claim()
            await client.aclose()
            assert p.last is not None and p.last.job_id == "node-1"
            assert (p.stats.peeks, p.stats.open_reads, p.stats.fronts) == (1, 1, 1)
            claimed: list[str] = []

            async def process(job: Job) -> None:
                claimed.append(job.id)
                worker.close()

            worker = AsyncWorker(qname, process, connection=redis_url)
            await asyncio.wait_for(worker.run(install_signals=False), 10)
            return hold, claimed

        assert wait_ids(r, q) == order  # nothing moved yet
        hold, claimed = asyncio.run(main())
        assert hold == 0 and claimed == ["node-1"]
        rest = [i for i in order if i != "node-1"]
        assert wait_ids(r, q) == rest  # the others in BullMQ's order
        after = q.get_counts(*COUNTS)
        assert after["waiting"] == before["waiting"] - 1
        assert after["completed"] + after["active"] == 1
        assert before["delayed"] == after["delayed"] == 0


def test_holds_when_no_job_suits_and_leaves_wait_alone(
    redis_url: str, qname: str, r: redis.Redis
) -> None:
    """m1 is open on another GPU, m2 is cold here and young: hold; once m1's
    entry there has expired, m2 still holds (no room) but m1 loads here if
    there is room; an aged m1 is taken although open elsewhere."""
    keys = BullpenKeys()
    with Queue(qname, redis_url) as q:
        now = int(time.time() * 1000)
        a = q.add("m1", {}).id
        b = q.add("m2", {}).id
        order = wait_ids(r, q)
        there, here = f"{OTHER}|bull:{qname}", f"{GPU}|bull:{qname}"
        r.zadd(keys.model_open("m1"), {there: now + 60_000, here: now + 60_000})
        # open on a third GPU for ANOTHER queue only: not a reason to skip m2
        r.zadd(keys.model_open("m2"), {f"GPU-far|bull:{qname}x": now + 60_000})

        async def main() -> None:
            client = await client_for(redis_url)
            p = placement(client, q.keys, View(room=F({"m1"})))
            r.delete(q.keys.marker)
            hold = await p.before_claim()
            assert HOLD_MIN_S <= hold <= HOLD_MAX_S and p.last is not None
            assert r.zscore(q.keys.marker, "0") == 0  # wakes an idle GPU
            assert "1 open elsewhere" in p.last.reason
            assert "1 cold hold" in p.last.reason
            assert p.stats.fronts == 0 and p.stats.holds == 1
            r.zadd(keys.model_open("m1"), {there: now - 1})  # expired there
            assert await p.before_claim() == 0
            assert p.last is not None and p.last.job_id == a
            await client.aclose()

        asyncio.run(main())
        assert wait_ids(r, q) == order
        r.zadd(keys.model_open("m1"), {there: now + 60_000})
        old = q.add("m1", {}, timestamp=now - BOUND - 1).id

        async def aged() -> None:
            client = await client_for(redis_url)
            p = placement(client, q.keys, View())
            assert await p.before_claim() == 0
            assert p.last is not None and p.last.job_id == old
            assert "age bound" in p.last.reason
            await client.aclose()

        asyncio.run(aged())
        assert wait_ids(r, q) == [old, a, b]


def test_huge_data_is_not_read_and_bad_data_is_no_model(
    redis_url: str, qname: str, r: redis.Redis
) -> None:
    """A `gen` job with data over the cap resolves its model without its data
    (none: it is taken as a job without a model); one with a fixed model
    keeps it; data that is not JSON is no model; a job hash that is gone
    is no model either."""
    huge = json.dumps({"model": "m3", "pad": "x" * DATA_CAP_BYTES})
    with Queue(qname, redis_url) as q:
        node_style_job(r, q, "bad", "gen", "{not json")
        node_style_job(r, q, "big", "gen", huge)
        node_style_job(r, q, "fixed-big", "m3", huge)
        node_style_job(r, q, "gone", "m1", "{}")
        r.delete(q.keys.job("gone"))
        recorder = Recorder()

        async def main() -> list[Candidate]:
            client = await client_for(redis_url)
            p = placement(client, q.keys, View(), model_for=recorder)
            paused, found = await p.peek()
            await client.aclose()
            assert not paused
            return found

        found = asyncio.run(main())
        models = {c.job_id: c.model for c in found}
        assert models == {"bad": None, "big": None, "fixed-big": "m3", "gone": None}
        assert ("gen", None) in recorder.seen and ("m3", None) in recorder.seen
        assert all(len(json.dumps(d)) < 100 for _, d in recorder.seen)
        assert [c.job_id for c in found] == ["bad", "big", "fixed-big", "gone"]


def test_scan_paused_and_prioritized(
    redis_url: str, qname: str, r: redis.Redis
) -> None:
    """Only the first `scan` jobs are looked at; a paused queue, or one whose
    jobs are all prioritized, gets the plain claim (0, nothing moved)."""
    with Queue(qname, redis_url) as q:
        ids = [q.add("m1", {}).id for _ in range(3)]
        late = q.add("m2", {}).id

        async def decide_once(view: View, scan: int = 16) -> tuple[float, Placement]:
            client = await client_for(redis_url)
            p = placement(client, q.keys, view, scan=scan)
            hold = await p.before_claim()
            await client.aclose()
            return hold, p

        hold, p = asyncio.run(decide_once(View(here=F({"m2"})), scan=3))
        assert hold > 0 and p.stats.fronts == 0  # m2 is 4th: not seen
        q.pause()
        hold, p = asyncio.run(decide_once(View(here=F({"m2"}))))
        assert hold == 0 and p.stats.fronts == 0 and p.last is None
        assert wait_ids(r, q) == [*ids, late]
        q.resume()
        q.drain()
        q.add("m2", {}, priority=1)
        hold, p = asyncio.run(decide_once(View()))
        assert hold == 0 and p.last is None and p.stats.peeks == 1


def test_a_redis_error_means_the_plain_claim(qname: str) -> None:
    """Redis unreachable: before_claim logs and answers 0; withdraw says False."""
    keys = QueueKeys(qname)

    async def main() -> None:
        client = aredis.Redis.from_url(
            "redis://127.0.0.1:1/0", decode_responses=True, socket_timeout=1
        )
        p = placement(client, keys, View())
        assert await p.before_claim() == 0
        assert p.stats.errors == 1
        await p.publish(client.pipeline(transaction=False), ["m1"], [], 6)
        assert await p.withdraw() is False
        await client.aclose()

    asyncio.run(main())


def test_publish_and_withdraw(redis_url: str, r: redis.Redis) -> None:
    """publish puts this GPU in the warm zsets of its resident models and the
    open zsets of those open too (expiring ttl from now; an expired member
    of a silent GPU is dropped), then out of those it left; through a
    pipeline nothing is written until the caller executes it; withdraw takes
    it out of all."""
    keys = BullpenKeys()
    warm, opened = keys.model_warm, keys.model_open

    def score(key: str) -> float | None:
        return r.zscore(key, f"{GPU}|bull:q")

    async def main() -> None:
        client = await client_for(redis_url)
        p = placement(client, QueueKeys("q"), View())
        r.zadd(warm("m1"), {f"{OTHER}|bull:q": 1})  # a GPU long silent
        before = int(time.time() * 1000)
        await p.publish(client, ["m1", "m2"], ["m1", "m3"], 6)
        after = int(time.time() * 1000)
        for key in (warm("m1"), warm("m2"), opened("m1")):
            s = score(key)
            assert s is not None and before + 6000 <= s <= after + 6000, key
        assert score(opened("m2")) is None and score(opened("m3")) is None
        assert r.zscore(warm("m1"), f"{OTHER}|bull:q") is None
        pipe = client.pipeline(transaction=False)
        await p.publish(pipe, ["m2"], [], 6)
        assert score(warm("m1")) is not None  # not executed yet
        await pipe.execute()
        assert score(warm("m1")) is None and score(opened("m1")) is None
        assert score(warm("m2")) is not None
        assert await p.withdraw() is True
        assert not any(r.exists(warm(m), opened(m)) for m in ("m1", "m2", "m3"))
        await client.aclose()

    asyncio.run(main())
