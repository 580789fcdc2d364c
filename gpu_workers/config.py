"""Configuration handed to gpu_workers: per-queue worker settings, the
supervisor's settings, and the spec a supervisor gives each worker process.

Everything arrives as arguments (from `manage.py runworkers`, the
`python -m gpu_workers` CLI, or tests); nothing here reads the environment.
"""

from __future__ import annotations

import json
import re
import socket
import sys
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from queues.cluster import NoHashTag, check_queue_slot, is_cluster_url
from queues.names import SAFE_QUEUE_NAME_RULE, is_safe_queue_name, qualified_name

from . import defaults
from .exceptions import ConfigError
from .settings import default, named
from .units import parse_bytes

#: Host names, queue prefixes and the namespace: each is one segment of
#: Bullpen's colon-separated keys and worker ids, so it holds no colon.
_SEGMENT_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")


def untagged(value: Any) -> Any:
    """`{x}` as `x`; anything else as it is. On a Redis Cluster a queue's
    keys must share one slot (queues/cluster.py), so a queue prefix or name
    may be one whole hash tag: `{bull}` (BullMQ's convention) or `{render}`."""
    if isinstance(value, str) and value.startswith("{") and value.endswith("}"):
        return value[1:-1]
    return value


def check_segment_name(value: Any, what: str, tag_ok: bool = False) -> str:
    """A host name, queue prefix or namespace: letters, digits, `_ . -` (no
    colons), at most 200 characters; with `tag_ok` (a queue prefix) also
    such a name in braces (see `untagged`)."""
    bare = untagged(value) if tag_ok else value
    if (
        not isinstance(bare, str)
        or not _SEGMENT_NAME.fullmatch(bare)
        or len(bare) > 200
    ):
        braces = " (or those in braces, {bull})" if tag_ok else ""
        raise ConfigError(
            f"{what} must be letters, digits, '_', '.' or '-'{braces}, not {value!r}"
        )
    return str(value)


def check_safe_queue_name(value: Any) -> str:
    """A queue name Bullpen accepts from config and operators (the API's rule,
    queues.names.is_safe_queue_name), or such a name in braces (see
    `untagged`)."""
    if not is_safe_queue_name(untagged(value)):
        raise ConfigError(
            f"a queue name must be {SAFE_QUEUE_NAME_RULE} (or those in braces, "
            f"{{render}}), not {value!r}"
        )
    return str(value)


#: The most waiting jobs placement may look at before a claim.
PLACEMENT_SCAN_MAX = 1000


def check_placement(on: Any, age_bound_s: Any, cold_hold_s: Any, scan: Any) -> None:
    """Placement's settings, or a ConfigError naming the one that is wrong:
    a bool; an age bound > 0; a cold hold 0..the age bound; a scan of
    1..PLACEMENT_SCAN_MAX jobs."""
    if not isinstance(on, bool):
        raise ConfigError(f"{named('placement')} must be on or off, not {on!r}")
    bound, hold = age_bound_s, cold_hold_s
    if isinstance(bound, bool) or not isinstance(bound, int | float) or bound <= 0:
        raise ConfigError(f"{named('placement_age_bound_s')} must be > 0")
    if (
        isinstance(hold, bool)
        or not isinstance(hold, int | float)
        or not 0 <= hold <= bound
    ):
        bound_name = named("placement_age_bound_s")
        raise ConfigError(f"{named('placement_cold_hold_s')} must be 0..{bound_name}")
    if isinstance(scan, bool) or not isinstance(scan, int):
        raise ConfigError(f"{named('placement_scan')} must be an int")
    if not 1 <= scan <= PLACEMENT_SCAN_MAX:
        raise ConfigError(f"{named('placement_scan')} must be 1..{PLACEMENT_SCAN_MAX}")


@dataclass
class QueueConfig:
    """How one queue is worked on this host: one process per GPU it may use."""

    queue: str
    prefix: str = defaults.QUEUE_PREFIX
    #: Jobs one worker process may hold at once (its slots).
    slots: int = defaults.SLOTS
    #: The most slots set_desired() may ask for.
    max_slots: int = defaults.MAX_SLOTS
    #: Worker processes to run at first (one per GPU); None = every GPU listed.
    workers: int | None = None
    #: GPUs this queue may use, by UUID or index, in placement order; None = all.
    gpus: list[str | int] | None = None
    #: Fraction of each GPU's budget for this queue; None = an equal split among
    #: the queues sharing the GPU that set none.
    vram_share: float | None = None
    lock_duration_ms: int = defaults.LOCK_DURATION_MS
    stalled_interval_ms: int = defaults.STALLED_INTERVAL_MS
    max_stalled_count: int = defaults.MAX_STALLED_COUNT

    def __post_init__(self) -> None:
        check_safe_queue_name(self.queue)
        check_segment_name(self.prefix, "a queue prefix", tag_ok=True)
        if not isinstance(self.slots, int) or not 1 <= self.slots <= self.max_slots:
            raise ConfigError(
                f"queue {self.queue}: slots must be 1..{self.max_slots}, "
                f"not {self.slots!r}"
            )
        if self.workers is not None and (
            not isinstance(self.workers, int) or self.workers < 0
        ):
            raise ConfigError(f"queue {self.queue}: workers must be >= 0")
        if self.vram_share is not None and not 0 < self.vram_share <= 1:
            raise ConfigError(f"queue {self.queue}: vram_share must be in (0, 1]")

    @property
    def key(self) -> str:
        """`prefix:queue`, the field naming it in desired-count hashes."""
        return qualified_name(self.prefix, self.queue)


@dataclass
class SupervisorConfig:
    """Everything a supervisor needs; the defaults of what an operator sets
    are gpu_workers/settings.py's (envconfig.py reads the environment)."""

    redis_url: str
    queues: list[QueueConfig]
    host: str = field(default_factory=socket.gethostname)
    #: auto | nvml | none | sim:2x24GiB
    gpus: str = default("gpus")
    handler_modules: list[str] = field(
        default_factory=lambda: list(default("handler_modules"))
    )
    namespace: str = defaults.NAMESPACE
    reserve_bytes: int = defaults.DRIVER_RESERVE_BYTES
    context_bytes: int = defaults.CUDA_CONTEXT_BYTES
    margin_bytes: int = defaults.SAFETY_MARGIN_BYTES
    max_restarts: int = defaults.MAX_RESTARTS
    restart_window_s: float = defaults.RESTART_WINDOW_S
    backoff_initial_s: float = defaults.RESTART_BACKOFF_INITIAL_S
    backoff_max_s: float = defaults.RESTART_BACKOFF_MAX_S
    drain_timeout_s: float = defaults.DRAIN_TIMEOUT_S
    heartbeat_interval_s: float = defaults.HEARTBEAT_INTERVAL_S
    heartbeat_ttl_s: float = defaults.HEARTBEAT_TTL_S
    #: Minutes of finished-job counts the workers keep (BullMQ metrics); 0 = none.
    metrics_data_points: int = defaults.METRICS_DATA_POINTS
    #: GPU-time accounting's retention and key cap (gputime.py).
    gpu_time_hours_kept: int = defaults.GPU_TIME_HOURS_KEPT
    gpu_time_days_kept: int = defaults.GPU_TIME_DAYS_KEPT
    gpu_time_max_keys: int = defaults.GPU_TIME_MAX_KEYS
    #: Plan warm pools from the backlog (pools.py; the handler modules load).
    model_pools: bool = default("model_pools")
    #: Claim-time placement of model jobs (placement.py), and its bounds.
    placement: bool = default("placement")
    placement_age_bound_s: float = default("placement_age_bound_s")
    placement_cold_hold_s: float = default("placement_cold_hold_s")
    placement_scan: int = default("placement_scan")
    #: One worker process per GPU serving all its queues (gpu_process.py);
    #: off: one per (queue, GPU), each with a share of the GPU's budget.
    process_per_gpu: bool = default("process_per_gpu")
    reconcile_interval_s: float = defaults.RECONCILE_INTERVAL_S
    control_interval_s: float = defaults.CONTROL_INTERVAL_S
    python: str = sys.executable
    #: Extra environment for worker processes.
    child_env: dict[str, str] = field(default_factory=dict)
    #: Write each worker process's output to <log_dir>/<worker>.log (else inherit).
    log_dir: str | None = None
    log_level: str = "INFO"
    #: "text" or "json" (one JSON object per line), for it and its workers.
    log_format: str = default("log_format")
    #: Rewritten every few seconds while the loop runs (gpu_workers/liveness.py).
    liveness_file: str | None = None

    def __post_init__(self) -> None:
        self.host = check_segment_name(self.host, "a host name")
        check_segment_name(self.namespace, "the Bullpen namespace")
        if self.log_format not in ("text", "json"):  # logs.LOG_FORMATS
            raise ConfigError(
                f"log format must be text or json, not {self.log_format!r}"
            )
        for q in self.queues:
            if q.prefix == self.namespace:
                raise ConfigError(
                    f"queue prefix {q.prefix!r} equals Bullpen's namespace; "
                    "Bullpen's keys must never live inside a queue's"
                )
        if isinstance(self.redis_url, str) and is_cluster_url(self.redis_url):
            for q in self.queues:
                try:
                    check_queue_slot(q.prefix, q.queue)
                except NoHashTag as exc:
                    raise ConfigError(str(exc)) from None
        keys = [q.key for q in self.queues]
        if len(keys) != len(set(keys)):
            raise ConfigError(f"a queue is configured twice: {keys}")
        for name in ("reserve_bytes", "context_bytes", "margin_bytes"):
            setattr(self, name, parse_bytes(getattr(self, name)))
        if self.max_restarts < 0 or self.restart_window_s <= 0:
            raise ConfigError("max_restarts must be >= 0 and restart_window_s > 0")
        points = self.metrics_data_points
        if not isinstance(points, int) or points < 0:
            raise ConfigError(
                f"metrics_data_points must be an int >= 0, not {points!r}"
            )
        for name in ("hours_kept", "days_kept", "max_keys"):
            value = getattr(self, f"gpu_time_{name}")
            if not isinstance(value, int) or value < 1:
                raise ConfigError(f"gpu_time_{name} must be an int >= 1")
        check_placement(
            self.placement,
            self.placement_age_bound_s,
            self.placement_cold_hold_s,
            self.placement_scan,
        )
        if self.heartbeat_ttl_s <= self.heartbeat_interval_s:
            raise ConfigError(
                "heartbeat_ttl_s must be longer than heartbeat_interval_s"
            )


@dataclass
class WorkerSpec:
    """What a supervisor hands one worker process (as JSON on its command line)."""

    redis_url: str
    host: str
    queue: str
    prefix: str
    gpu_uuid: str
    gpus: str
    budget_bytes: int
    slots: int
    max_slots: int
    handler_modules: list[str]
    namespace: str = defaults.NAMESPACE
    context_bytes: int = defaults.CUDA_CONTEXT_BYTES
    heartbeat_interval_s: float = defaults.HEARTBEAT_INTERVAL_S
    heartbeat_ttl_s: float = defaults.HEARTBEAT_TTL_S
    control_interval_s: float = defaults.CONTROL_INTERVAL_S
    lock_duration_ms: int = defaults.LOCK_DURATION_MS
    stalled_interval_ms: int = defaults.STALLED_INTERVAL_MS
    max_stalled_count: int = defaults.MAX_STALLED_COUNT
    drain_timeout_s: float = defaults.DRAIN_TIMEOUT_S
    metrics_data_points: int = defaults.METRICS_DATA_POINTS
    gpu_time_hours_kept: int = defaults.GPU_TIME_HOURS_KEPT
    gpu_time_days_kept: int = defaults.GPU_TIME_DAYS_KEPT
    gpu_time_max_keys: int = defaults.GPU_TIME_MAX_KEYS
    placement: bool = default("placement")
    placement_age_bound_s: float = default("placement_age_bound_s")
    placement_cold_hold_s: float = default("placement_cold_hold_s")
    placement_scan: int = default("placement_scan")
    restarts: int = 0
    log_level: str = "INFO"
    log_format: str = "text"
    #: Set by a supervisor: the liveness file this worker rewrites every beat
    #: so the supervisor vouches for it (heartbeat.py); empty: it beats alone.
    alive_file: str = ""

    @property
    def worker_id(self) -> str:
        """Stable across restarts: host, queue and GPU."""
        return worker_id(self.host, self.prefix, self.queue, self.gpu_uuid)

    def to_json(self) -> str:
        """The command-line form."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> WorkerSpec:
        """Parse the command-line form (unknown keys are a ConfigError)."""
        data = json.loads(text)
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ConfigError(f"unknown worker spec keys: {sorted(unknown)}")
        return cls(**data)

    @classmethod
    def list_from_json(cls, text: str) -> list[WorkerSpec]:
        """One spec, or a JSON list of them (a GPU process's queues)."""
        data = json.loads(text)
        items = data if isinstance(data, list) else [data]
        if not all(isinstance(item, dict) for item in items):
            raise ConfigError("a worker spec is a JSON object or a list of them")
        return [cls.from_json(json.dumps(item)) for item in items]


def worker_id(host: str, prefix: str, queue: str, gpu_uuid: str) -> str:
    """The id of the worker process of one queue on one GPU of one host."""
    return f"{host}:{qualified_name(prefix, queue)}:{gpu_uuid}"


def parse_workers(value: str | list[dict[str, Any]]) -> list[QueueConfig]:
    """The workers setting: JSON (a list of QueueConfig objects) or the short
    form `queue:slots[,queue:slots...]`, e.g. `txt2img:3,video:1`."""
    if isinstance(value, list):
        items = value
    else:
        text = value.strip()
        if not text:
            return []
        if text.startswith("["):
            try:
                items = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ConfigError(
                    f"{named('workers')} is not valid JSON: {exc}"
                ) from exc
        else:
            items = []
            for part in text.split(","):
                name, _, slots = part.strip().partition(":")
                try:
                    items.append(
                        {"queue": name, **({"slots": int(slots)} if slots else {})}
                    )
                except ValueError:
                    raise ConfigError(
                        f"bad {named('workers')} entry {part!r} (expected queue:slots)"
                    ) from None
    known = {f.name for f in fields(QueueConfig)}
    result = []
    for item in items:
        if not isinstance(item, dict) or set(item) - known:
            raise ConfigError(f"bad worker config {item!r}; keys: {sorted(known)}")
        try:
            result.append(QueueConfig(**item))
        except TypeError as exc:
            raise ConfigError(f"bad worker config {item!r}: {exc}") from exc
    return result
