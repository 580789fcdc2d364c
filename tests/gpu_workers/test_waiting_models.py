"""`loading_model`: a claimed job whose worker is loading its model (a cold
start) says so, with the model, GPU, host, since when and about how long
(the worker's expected time, else the measured loads in models:stats); a
waiting job whose model loads on a GPU serving its queue carries it in
`also`. Real Redis, real queue scripts, heartbeats as workers write them."""

from __future__ import annotations

import json
import time
from typing import Any

import redis

from gpu_workers.handlers import handler
from gpu_workers.models import from_data, sim_model
from gpu_workers.waiting import CODES, EXPLAINED_STATES, explain
from queues import Job, Queue, ops
from tests.dashboard.helpers import SIM_GPU, beat, make_active
from tests.gpu_workers.waiting_helpers import GiB, codes, connected_worker, reason_of

sim_model("wm-flux", "6GiB", 15)
sim_model("wm-sdxl", "7GiB", 20)


@handler("wm-generate", vram="2GiB", model=from_data("model"))
def _generate(ctx: Any) -> None:  # pragma: no cover - never run here
    return None


def loading_worker(
    r: redis.Redis,
    q: Queue,
    running: list[Any],
    models: list[dict[str, Any]] | None = None,
    ident: str = "h-2:w",
) -> None:
    """A GPU worker on host h-2 (GPU SIM-h-2) serving `q` with these running
    summaries and models, as the residency heartbeat writes them."""
    record: dict[str, Any] = {
        "id": ident,
        "host": "h-2",
        "queue": q.name,
        "prefix": q.prefix,
        "gpu": {**SIM_GPU, "uuid": "SIM-h-2"},
        "slots": 2,
        "budget_bytes": 21 * GiB,
        "committed_bytes": 8 * GiB,
        "running": running,
        "counters": {},
        "state": "busy",
        "ts_ms": ops.now_ms(),
    }
    if models is not None:
        record["models"] = models
    beat(r, "worker", ident, record)


def jobs_of(q: Queue, ids: list[str]) -> list[Job[Any]]:
    """The jobs with these ids, in order."""
    found = [q.get_job(i) for i in ids]
    assert all(j is not None for j in found)
    return [j for j in found if j is not None]


def ops_clock(ms: int) -> str:
    """A time as the message writes it."""
    return time.strftime("%H:%M:%S UTC", time.gmtime(ms / 1000))


def summary(job_id: str, **loading: Any) -> dict[str, Any]:
    """A running summary waiting on its model's load."""
    return {
        "id": job_id,
        "name": "wm-generate",
        "model": "wm-flux",
        "working_bytes": 2 * GiB,
        "state": "loading_model",
        "loading": loading,
    }


def test_the_code_is_listed() -> None:
    """The code is one of the stable codes; active jobs may be explained."""
    assert "loading_model" in CODES and "active" in EXPLAINED_STATES


def test_active_job_loading_its_model(r: redis.Redis, q: Queue) -> None:
    """The worker's heartbeat lists the claimed job loading_model with an
    expected time: the reason carries it, and the message says when."""
    job_id = make_active(q, "wm-generate", {"model": "wm-flux"})
    since = ops.now_ms() - 4_000
    loading_worker(
        r, q, [summary(job_id, model="wm-flux", since_ms=since, expected_s=15.0)]
    )
    reason = reason_of(r, q, job_id)
    assert reason is not None and codes(reason) == ["loading_model"]
    assert reason.numbers == {
        "model": "wm-flux",
        "gpu": "SIM-h-2",
        "host": "h-2",
        "since_ms": since,
        "expected_s": 15.0,
    }
    stamp = ops_clock(since)
    assert f"on GPU SIM-h-2 (h-2) since {stamp}" in reason.message
    assert "loading model wm-flux" in reason.message.lower()
    assert "about 15 s expected" in reason.message
    out = reason.as_dict()
    assert out["code"] == "loading_model" and out["also"] == []


def test_expected_time_from_past_loads(r: redis.Redis, q: Queue) -> None:
    """No expected time in the record: models:stats' ewma_load_s, said so."""
    job_id = make_active(q, "wm-generate", {"model": "wm-flux"})
    r.hset(
        "bullpen:models:stats",
        "wm-flux",
        json.dumps({"loads": 3, "load_s_sum": 40.0, "ewma_load_s": 12.5}),
    )
    loading_worker(r, q, [summary(job_id, model="wm-flux", since_ms=ops.now_ms())])
    reason = reason_of(r, q, job_id)
    assert reason is not None and reason.code == "loading_model"
    assert reason.numbers["expected_s"] == 12.5
    assert "about 12 s from past loads" in reason.message


def test_no_expected_time_anywhere(r: redis.Redis, q: Queue) -> None:
    """Neither the record nor the stats know: expected_s is null, no guess."""
    job_id = make_active(q, "wm-generate", {"model": "wm-flux"})
    r.hset("bullpen:models:stats", "wm-flux", "{not json")
    loading_worker(r, q, [summary(job_id, model="wm-flux")])
    reason = reason_of(r, q, job_id)
    assert reason is not None and reason.code == "loading_model"
    assert reason.numbers["expected_s"] is None and reason.numbers["since_ms"] is None
    assert "about" not in reason.message


def test_running_or_unlisted_active_jobs_get_no_reason(
    r: redis.Redis, q: Queue
) -> None:
    """An active job that runs, waits for VRAM, or no worker lists: no reason
    (as before); a queue with only active jobs reads no queue facts."""
    ids = [make_active(q, "wm-generate", {"model": "wm-flux"}) for _ in range(3)]
    loading_worker(
        r,
        q,
        [
            {**summary(ids[0]), "state": "running"},
            {**summary(ids[1]), "state": "waiting-for-vram"},
        ],
    )
    pairs = [(job, "active") for job in jobs_of(q, ids)]
    assert explain(r, q.prefix, q.name, pairs) == {}


def test_odd_records_never_raise(r: redis.Redis, q: Queue) -> None:
    """Bad model names, non-dict loading, negative or text times, a running
    list that is not a list: no reason or a reason without the odd numbers."""
    ids = [make_active(q, "wm-generate", {"model": "wm-flux"}) for _ in range(4)]
    loading_worker(
        r,
        q,
        [
            summary(ids[0], model="../etc", since_ms=-5, expected_s="soon"),
            {**summary(ids[1]), "loading": "flux"},
            summary(ids[2], model="wm-flux", since_ms=True, expected_s=float("nan")),
            "not a dict",
        ],
    )
    beat(
        r,
        "worker",
        "odd",
        {
            "id": "odd",
            "queue": q.name,
            "prefix": q.prefix,
            "running": "nope",
            "models": {"x": 1},
            "ts_ms": 1,
        },
    )
    found = explain(r, q.prefix, q.name, [(j, "active") for j in jobs_of(q, ids)])
    # ids[0]: the summary's own model field names wm-flux (loading's is bad)
    assert found[ids[0]].numbers["model"] == "wm-flux"
    assert found[ids[0]].numbers["since_ms"] is None
    assert found[ids[0]].numbers["expected_s"] is None
    assert found[ids[1]].numbers["model"] == "wm-flux"
    assert found[ids[2]].numbers["since_ms"] is None
    assert found[ids[2]].numbers["expected_s"] is None
    assert ids[3] not in found


def test_waiting_job_whose_model_is_loading(
    r: redis.Redis, redis_url: str, q: Queue
) -> None:
    """A waiting job of a model loading on a GPU serving the queue: its place
    in line first, the load in `also`; a job of another model: no such line."""
    active = make_active(q, "wm-generate", {"model": "wm-flux"})
    loading_worker(
        r,
        q,
        [summary(active, model="wm-flux", since_ms=ops.now_ms(), expected_s=9)],
        models=[
            {"name": "wm-flux", "state": "loading", "weights_bytes": 6 * GiB},
            {"name": "wm-sdxl", "state": "resident", "weights_bytes": 7 * GiB},
        ],
    )
    same = q.add("wm-generate", {"model": "wm-flux"})
    other = q.add("wm-generate", {"model": "wm-sdxl"})
    with connected_worker(redis_url, q):
        mine = reason_of(r, q, same.id)
        theirs = reason_of(r, q, other.id)
    assert mine is not None and codes(mine) == ["queued", "loading_model"]
    assert mine.also[0].numbers["gpu"] == "SIM-h-2"
    assert mine.also[0].message.startswith("Its model wm-flux is loading on GPU")
    assert theirs is not None and codes(theirs) == ["queued"]
