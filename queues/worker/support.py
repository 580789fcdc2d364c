"""What the worker's parts share: the logger, safe text, naming."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from ..clients import worker_connection_name
from ..cluster import is_cluster_client, node_client
from ..connection import sibling_async_client
from ..job import Job
from ..metrics import MetricsOptions
from .policy import ClaimPolicy

log = logging.getLogger("queues.worker")

Processor = Callable[[Job], Any]


def _text(value: str) -> str:
    """`value` made encodable as UTF-8 (a lone surrogate, as from undecodable
    bytes, becomes a \\udcxx escape), so the failure it describes can be saved."""
    return value.encode("utf-8", "backslashreplace").decode("utf-8")


class _EncodableRecords(logging.Filter):
    """The worker's log lines quote job names, ids and error messages that
    another client or a processor made; one holding a lone surrogate would
    make any UTF-8 handler (a log file, a collector) fail on the line. Here
    its message, arguments and traceback are made encodable first."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = _text(record.getMessage())
        record.args = ()
        if record.exc_info and not record.exc_text:
            record.exc_text = _text(
                logging.Formatter().formatException(record.exc_info)
            )
        return True


log.addFilter(_EncodableRecords())


def blocking_connection_name(prefix: str, queue: str, worker_name: str | None) -> str:
    """BullMQ's name for a worker connection, which Node's getWorkers() lists."""
    return worker_connection_name(prefix, queue, worker_name)


async def blocking_client(client: Any, key: str, name: str) -> Any:
    """The worker's blocking client, whose one connection is named `name`
    (Node's getWorkers() lists named connections): a sibling of `client`,
    or on a cluster a plain client on the primary serving `key` (the marker
    it blocks on), made again by the caller when that slot moves."""
    if is_cluster_client(client):
        return await node_client(client, key, socket_timeout=None, client_name=name)
    return sibling_async_client(client, socket_timeout=None, client_name=name)


def check_options(
    processor: Any,
    concurrency: int,
    limiter: Mapping[str, int] | None,
    metrics: MetricsOptions | None,
    claim_policy: ClaimPolicy | None = None,
) -> None:
    """Refuse a worker's options that cannot work (ValueError, TypeError)."""
    if not callable(processor):
        raise TypeError("processor must be callable")
    if concurrency < 1:
        raise ValueError("concurrency must be >= 1")
    if limiter is not None and not (
        limiter.get("max", 0) >= 1 and limiter.get("duration", 0) >= 1
    ):
        raise ValueError("limiter needs max >= 1 and duration >= 1 (ms)")
    if metrics is not None and not isinstance(metrics, MetricsOptions):
        raise TypeError("metrics must be a MetricsOptions(max_data_points=...)")
    if claim_policy is not None and not isinstance(claim_policy, ClaimPolicy):
        raise TypeError("claim_policy needs capacity(claimed) and bind(wake)")
