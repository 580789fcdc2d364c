"""The fleet of GPU workers as Redis holds it: the read model over the
heartbeats supervisors and workers write (heartbeat.py), and the small
write API the dashboard calls.

    fleet = Fleet("redis://...")
    fleet.list_workers()          # live worker processes (and failed ones)
    fleet.list_gpus()             # every host's GPUs with budget and use
    fleet.set_desired("host-a", "txt2img", workers=2, slots=3)
    fleet.request_cancel("txt2img", job_id)
    fleet.job_vram("txt2img", job_id)   # declared vs measured peak
    fleet.pin_model("GPU-1234", "sdxl")  # operators' pins (models:pins)

Reading never writes: a listing takes the index entries that have not
expired yet (the writers trim the rest), so a read-only Redis user or
replica serves the dashboard. Worker records (keys.py) hold: id, host,
pid, queue, prefix, gpu (a snapshot), simulated, slots, budget_bytes,
committed_bytes, free_bytes, running [{id, name, declared_bytes, admitted,
state, progress, ...}], counters {processed, failed, oom, cancelled,
too_big}, restarts, state (starting|idle|busy|draining|failed), ts_ms.
"""

from __future__ import annotations

from typing import Any

import redis

from queues import Queue, codec
from queues.attempts import parse_attempts
from queues.connection import sync_client
from queues.names import qualified_name
from queues.state import TERMINAL, JobState

from . import defaults
from .clock import now_ms
from .config import check_safe_queue_name, check_segment_name
from .control import announce_cancel, announce_desired, announce_models
from .desired import parse_desired
from .exceptions import ConfigError, ValidationError
from .fleet_snapshot import FleetSnapshot, get_all, parse_live, read_snapshot
from .fleet_snapshot import one_per_process as one_per_process  # fleet.py's API
from .keys import BullpenKeys
from .models import MODEL_NAME, check_model_name

#: Models an operator may pin on one GPU.
PINS_PER_GPU = 16
_PIN_TRIES = 5
#: HSET (or HDEL for "") a field only while it holds ARGV[2] ("" = absent).
_SET_IF_SAME = """
local now = redis.call('HGET', KEYS[1], ARGV[1]) or ''
if now ~= ARGV[2] then return 0 end
if ARGV[3] == '' then redis.call('HDEL', KEYS[1], ARGV[1])
else redis.call('HSET', KEYS[1], ARGV[1], ARGV[3]) end
return 1
"""


def parse_pins(raw: dict[str, str]) -> dict[str, list[str]]:
    """`models:pins` as read (uuid -> JSON list): the valid model names of
    each GPU, in order; a field another client wrote oddly reads as none."""
    found: dict[str, list[str]] = {}
    for gpu, value in raw.items():
        try:
            names = codec.loads(value)
        except (codec.JSONDecodeError, TypeError, ValueError):
            continue
        if isinstance(names, list):
            good = [n for n in names if isinstance(n, str) and MODEL_NAME.fullmatch(n)]
            found[gpu] = list(dict.fromkeys(good))[:PINS_PER_GPU]
    return found


class Fleet:
    """Read model and write API over every host's supervisors and workers."""

    def __init__(
        self, connection: str | redis.Redis, namespace: str = defaults.NAMESPACE
    ) -> None:
        # A decoding client (replies are str), the given one when it decodes.
        self.client: Any = sync_client(connection)
        self.keys = BullpenKeys(namespace)

    def close(self) -> None:
        """Close the client."""
        self.client.close()

    # --- reading ------------------------------------------------------------
    def _live(self, index: str, key_of: Any) -> list[dict[str, Any]]:
        # Entries up to now have expired: skip them (exclusive min), and leave
        # trimming them to the writers (heartbeat.py).
        entries = self.client.zrangebyscore(
            index, f"({now_ms()}", "+inf", withscores=True
        )
        if not entries:
            return []
        # MGETs of a thousand on one node, one GET each on a cluster (the
        # records sit in many slots): one round trip either way.
        values = get_all(self.client, [key_of(ident) for ident, _ in entries])
        return parse_live(values, (expiry for _, expiry in entries))

    def list_hosts(self) -> list[dict[str, Any]]:
        """Supervisors with a fresh heartbeat, by host name."""
        hosts = self._live(self.keys.hosts, self.keys.host)
        return sorted(hosts, key=lambda h: str(h.get("host", "")))

    def list_workers(self, host: str | None = None) -> list[dict[str, Any]]:
        """Worker records with a fresh heartbeat (failed ones included), sorted."""
        workers = self._live(self.keys.workers, self.keys.worker)
        if host is not None:
            workers = [w for w in workers if w.get("host") == host]
        return sorted(workers, key=lambda w: str(w.get("id", "")))

    def list_gpus(self) -> list[dict[str, Any]]:
        """Every live host's GPUs: the probe's reading, the budget and committed
        VRAM of the workers on it, their ids, and the GPU's OOM count (the
        snapshot's join: linear in the fleet, three round trips)."""
        return self.snapshot().gpus

    def snapshot(self) -> FleetSnapshot:
        """Hosts, workers, GPUs and their aggregates, read at once
        (fleet_snapshot.py)."""
        return read_snapshot(self.client, self.keys)

    def get_desired(self, host: str) -> dict[str, dict[str, int]]:
        """`prefix:queue` -> {"workers": n, "slots": s} for one host."""
        raw = self.client.hgetall(self.keys.desired(host))
        return {k: parse_desired(v) for k, v in raw.items()}

    def job_vram(
        self, queue: str, job_id: str, prefix: str = defaults.QUEUE_PREFIX
    ) -> dict[str, Any] | None:
        """A job's declared VRAM beside its measured peak (None if not recorded)."""
        raw = self.client.hgetall(self.keys.job(prefix, queue, job_id))
        if not raw:
            return None
        out: dict[str, Any] = {}
        for k, v in raw.items():
            out[k] = int(v) if v.lstrip("-").isdigit() else v
        return out

    def job_attempts(
        self, queue: str, job_id: str, prefix: str = defaults.QUEUE_PREFIX
    ) -> list[dict[str, Any]]:
        """A job's attempt records, oldest first (see queues/attempts.py)."""
        raw = self.client.lrange(self.keys.attempts(prefix, queue, job_id), 0, -1)
        return parse_attempts(raw)

    # --- writing --------------------------------------------------------------
    def set_desired(
        self,
        host: str,
        queue: str,
        workers: int | None = None,
        slots: int | None = None,
        prefix: str = defaults.QUEUE_PREFIX,
    ) -> dict[str, int]:
        """Set how many worker processes (and slots each) a host runs for a
        queue; the host's supervisor and workers are told at once (control.py)
        and converge within about 2 s. Validated
        against the limits the live host publishes."""
        try:
            check_segment_name(host, "a host name")
            check_safe_queue_name(queue)
            check_segment_name(prefix, "a queue prefix", tag_ok=True)
        except ConfigError as exc:
            raise ValidationError(str(exc)) from None
        if workers is None and slots is None:
            raise ValidationError("give workers, slots or both")
        for name, value, low in (("workers", workers, 0), ("slots", slots, 1)):
            if value is not None and (
                not isinstance(value, int) or isinstance(value, bool) or value < low
            ):
                raise ValidationError(
                    f"{name} must be an integer >= {low}, not {value!r}"
                )
        # Live by its index entry (the record may outlast it, heartbeat.py).
        score = self.client.zscore(self.keys.hosts, host)
        raw_host = self.client.get(self.keys.host(host))
        if not raw_host or score is None or float(score) <= now_ms():
            raise ValidationError(f"no live supervisor on host {host!r}")
        field = qualified_name(prefix, queue)
        limits = codec.loads(raw_host).get("queues", {}).get(field)
        if limits is None:
            raise ValidationError(f"host {host!r} does not serve queue {field}")
        if workers is not None and workers > limits["max_workers"]:
            raise ValidationError(
                f"host {host!r} can run at most {limits['max_workers']} worker(s) for "
                f"{queue} (one per GPU it may use), not {workers}"
            )
        if slots is not None and slots > limits["max_slots"]:
            raise ValidationError(
                f"at most {limits['max_slots']} slots per worker "
                f"for {queue}, not {slots}"
            )
        key = self.keys.desired(host)
        current = parse_desired(self.client.hget(key, field))
        if workers is not None:
            current["workers"] = workers
        if slots is not None:
            current["slots"] = slots
        self.client.hset(key, field, codec.dumps(current))
        announce_desired(self.client, self.keys, host, field)
        return current

    def pins(self) -> dict[str, list[str]]:
        """Operators' pins: GPU uuid -> the models pinned there."""
        return parse_pins(self.client.hgetall(self.keys.model_pins()))

    def pin_model(self, gpu: str, model: str) -> list[str]:
        """Keep `model` resident on GPU `gpu`: its worker loads it when idle
        and evicts it last, only when a job could not run otherwise, then
        loads it back once idle; the GPU's pins after. A model no worker
        declares may be pinned (it is shown as such)."""
        return self._change_pins(gpu, model, add=True)

    def unpin_model(self, gpu: str, model: str) -> list[str]:
        """Drop an operator's pin; the GPU's pins after."""
        return self._change_pins(gpu, model, add=False)

    def _change_pins(self, gpu: str, model: str, add: bool) -> list[str]:
        try:
            check_segment_name(gpu, "a GPU uuid")
            check_model_name(model)
        except ConfigError as exc:
            raise ValidationError(str(exc)) from None
        key = self.keys.model_pins()
        for _ in range(_PIN_TRIES):
            raw = self.client.hget(key, gpu)
            current = parse_pins({gpu: raw}).get(gpu, []) if raw else []
            if add and model not in current:
                if len(current) >= PINS_PER_GPU:
                    raise ValidationError(
                        f"GPU {gpu} has {PINS_PER_GPU} pins already: unpin one first"
                    )
                current.append(model)
            elif not add:
                if model not in current:
                    raise ValidationError(f"{model} is not pinned on GPU {gpu}")
                current.remove(model)
            new = codec.dumps(current) if current else ""
            # Compare and set (a cluster has no WATCH across its nodes):
            # written only if the field is still what was read.
            if self.client.eval(_SET_IF_SAME, 1, key, gpu, raw or "", new):
                announce_models(self.client, self.keys, [gpu])
                return current
        raise ValidationError(f"the pins of GPU {gpu} kept changing: try again")

    def request_cancel(
        self, queue: str, job_id: str, prefix: str = defaults.QUEUE_PREFIX
    ) -> None:
        """Ask the worker running (or about to run) a job to stop it; the job
        ends failed with reason "cancelled by operator"."""
        if not isinstance(job_id, str) or not job_id or len(job_id) > 200:
            raise ValidationError(f"bad job id {job_id!r}")
        try:
            check_safe_queue_name(queue)
            check_segment_name(prefix, "a queue prefix", tag_ok=True)
        except ConfigError as exc:
            raise ValidationError(str(exc)) from None
        q = Queue(queue, self.client, prefix)
        state = q.get_job_state(job_id)
        if state is JobState.UNKNOWN:
            raise ValidationError(
                f"job {job_id} does not exist in {qualified_name(prefix, queue)}"
            )
        if state in TERMINAL:
            raise ValidationError(f"job {job_id} already {state.value}")
        self.client.set(
            self.keys.cancel(prefix, queue, job_id),
            codec.dumps({"ts_ms": now_ms()}),
            ex=defaults.CANCEL_TTL_S,
        )
        announce_cancel(self.client, self.keys, prefix, queue, job_id)
