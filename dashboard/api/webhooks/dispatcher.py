"""The webhook dispatcher (`manage.py runwebhooks`): follows the events
streams of every queue that has webhooks with a consumer group, turns each
event into deliveries in their outboxes, and runs the delivery worker.

Nothing is lost when it is killed: an event is acknowledged (XACK) only once
every delivery it causes is in its outbox and the outbox's head is a job of
the delivery queue. A restarted dispatcher first re-reads the entries it had
read but not acknowledged (its consumer name is stable: the host name), and
entries a dead dispatcher of another host left behind are claimed after an
idle time (XAUTOCLAIM). Deliveries are idempotent by id, so re-reading an
entry sends nothing twice; a delivery job killed mid-send is retried by the
queue's stalled-job check (at least once, never lost).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any

import redis
from redis.exceptions import ResponseError

from dashboard.shared.redaction import redact_fields
from gpu_workers.defaults import NAMESPACE
from queues import Queue, Worker
from queues.cluster import is_cluster_client
from queues.connection import sync_client
from queues.defaults import PREFIX
from queues.events import EventName, QueueEvent, parse_entry
from queues.names import qualified_name, split_qualified_name
from queues.outages import Outage, backoff_s, recoverable

from ...shared import conf
from .. import defaults
from ..keys import ApiKeys
from . import registry, ssrf
from .deliver import Deliverer
from .groupreads import GroupReads
from .outbox import DeliveryOptions, Outbox, delivery_id

log = logging.getLogger("dashboard.api.webhooks")


@dataclass(frozen=True)
class DispatcherConfig:
    """Everything the dispatcher needs (`from_settings()` builds it)."""

    redis_url: str
    prefix: str = PREFIX
    namespace: str = NAMESPACE
    delivery_queue: str = defaults.WEBHOOK_QUEUE
    group: str = defaults.WEBHOOK_GROUP
    #: The machine's host name, as the host-name setting's default (from_settings).
    consumer: str = field(default_factory=socket.gethostname)
    policy: ssrf.Policy = field(default_factory=ssrf.Policy)
    timeout_s: float = defaults.WEBHOOK_TIMEOUT_S
    attempts: int = defaults.WEBHOOK_ATTEMPTS
    backoff_ms: int = defaults.WEBHOOK_BACKOFF_MS
    progress_interval_ms: int = defaults.WEBHOOK_PROGRESS_INTERVAL_MS
    concurrency: int = defaults.WEBHOOK_CONCURRENCY
    lock_duration_ms: int = defaults.WEBHOOK_LOCK_DURATION_MS
    claim_idle_ms: int = defaults.WEBHOOK_CLAIM_IDLE_MS
    read_count: int = defaults.WEBHOOK_READ_COUNT
    block_ms: int = defaults.WEBHOOK_BLOCK_MS
    refresh_s: float = defaults.WEBHOOK_REFRESH_S
    record_ttl_s: int = defaults.WEBHOOK_RECORD_TTL_S
    #: Run the stream reader / the delivery worker (both by default).
    read: bool = True
    deliver: bool = True

    @classmethod
    def from_settings(cls, **overrides: Any) -> DispatcherConfig:
        """The configuration in Django settings (overrides win)."""
        c = conf.get()
        config = cls(
            redis_url=c.redis_url,
            prefix=c.prefix,
            namespace=c.namespace,
            delivery_queue=c.webhook_queue,
            consumer=c.hostname,
            policy=ssrf.Policy(c.webhook_allow_private, c.webhook_allowed_networks),
            timeout_s=c.webhook_timeout_s,
            attempts=c.webhook_attempts,
            backoff_ms=c.webhook_backoff_ms,
            progress_interval_ms=c.webhook_progress_interval_ms,
            concurrency=c.webhook_concurrency,
            lock_duration_ms=c.webhook_lock_duration_ms,
            claim_idle_ms=c.webhook_claim_idle_ms,
        )
        return replace(config, **{k: v for k, v in overrides.items() if v is not None})


def _payload(queue_key: str, event: QueueEvent) -> dict[str, Any]:
    """A webhook body's fields, from the one parser's event (queues.events)."""
    _, queue = split_qualified_name(queue_key)
    payload: dict[str, Any] = {
        "event": event.event,
        "queue": queue,
        "job_id": event.job_id,
        "event_id": event.id,
        "timestamp": int(event.id.split("-", 1)[0]),
    }
    if event.event == EventName.PROGRESS:
        payload["progress"] = event.fields.get("data")
    elif event.event == EventName.COMPLETED:
        payload["returnvalue"] = event.fields.get("returnvalue")
    elif event.event == EventName.FAILED:
        payload["failed_reason"] = event.fields.get("failedReason")
    return redact_fields(payload)


class StreamReader:
    """Reads the followed queues' events with the consumer group and pushes
    deliveries; one `step()` is one read, handle and acknowledge."""

    def __init__(
        self, config: DispatcherConfig, client: redis.Redis, outbox: Outbox
    ) -> None:
        self.config = config
        self.client = client
        self.outbox = outbox
        self.keys = ApiKeys(config.namespace)
        self.streams: dict[str, str] = {}  # events key -> queue key
        self.subs: dict[str, list[dict[str, Any]]] = {}
        self._refreshed = 0.0
        self._claimed = 0.0
        #: Streams whose own pending entries are still to be re-read ("0").
        self._backlog: set[str] = set()
        #: On a cluster: one blocking read per slot group, all at once.
        self.group_reads: GroupReads | None = None
        if is_cluster_client(client):
            c = config
            self.group_reads = GroupReads(
                c.redis_url, c.group, c.consumer, c.read_count, c.block_ms
            )

    # --- what to follow ---------------------------------------------------------
    def refresh(self, force: bool = False) -> None:
        """Re-read the followed queues and subscriptions (every refresh_s)."""
        now = time.monotonic()
        if not force and now - self._refreshed < self.config.refresh_s:
            return
        self._refreshed = now
        subs: dict[str, list[dict[str, Any]]] = {}
        for sub in registry.subscriptions(self.client, self.keys):
            if sub.get("active"):
                key = qualified_name(sub["prefix"], sub["queue"])
                subs.setdefault(key, []).append(sub)
        self.subs = subs
        for queue_key in registry.followed_queues(self.client, self.keys):
            stream = registry.events_key(queue_key)
            if stream not in self.streams:
                registry.ensure_group(self.client, queue_key, self.config.group)
                self.streams[stream] = queue_key
                self._backlog.add(stream)

    # --- reading ------------------------------------------------------------------
    def step(self) -> int:
        """One read of new entries (own unacknowledged ones first), handled
        and acknowledged; returns how many entries were handled."""
        self.refresh()
        if not self.streams:
            time.sleep(self.config.block_ms / 1000)
            return 0
        handled = self._claim_abandoned()
        for stream in list(self._backlog):
            reply = self._read({stream: "0"}, None)
            entries = reply[0][1] if reply else []
            if entries:
                handled += self._handle(stream, entries)
            else:
                self._backlog.discard(stream)
        if handled:
            return handled
        new = {s: ">" for s in self.streams}
        if self.group_reads is None:
            for stream, entries in self._read(new, self.config.block_ms):
                handled += self._handle(stream, entries)
            return handled
        replies, error = self.group_reads.read(new, self._no_group)
        for stream, entries in replies:
            handled += self._handle(stream, entries)
        if error is not None:  # raised once what other groups read is handled
            raise error
        return handled

    def _no_group(self, stream: str) -> None:
        """The stream was deleted (e.g. the queue obliterated): start over."""
        registry.ensure_group(self.client, self.streams[stream], self.config.group)

    def _read(self, ids: dict[str, str], block: int | None) -> list[Any]:
        try:
            reply: Any = self.client.xreadgroup(
                self.config.group,
                self.config.consumer,
                ids,  # type: ignore[arg-type]
                count=self.config.read_count,
                block=block,
            )
            return list(reply or [])
        except ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            # The stream was deleted (e.g. the queue obliterated): start over.
            for stream in ids:
                registry.ensure_group(
                    self.client, self.streams[stream], self.config.group
                )
            return []

    def _claim_abandoned(self) -> int:
        """Take over entries another (dead) consumer read and never acked."""
        now = time.monotonic()
        if now - self._claimed < self.config.claim_idle_ms / 2000:
            return 0
        self._claimed = now
        handled = 0
        for stream in list(self.streams):
            try:
                reply = self.client.xautoclaim(
                    stream,
                    self.config.group,
                    self.config.consumer,
                    self.config.claim_idle_ms,
                    "0-0",
                    count=self.config.read_count,
                )
            except ResponseError as exc:
                if "NOGROUP" in str(exc):
                    continue
                raise
            entries = reply[1] if reply else []
            if entries:
                handled += self._handle(stream, entries)
        return handled

    def _handle(self, stream: str, entries: list[Any]) -> int:
        queue_key = self.streams[stream]
        done: list[str] = []
        for event_id, fields in entries:
            if fields:  # an entry trimmed from the stream reads as empty
                self.handle_event(queue_key, parse_entry(event_id, fields))
            done.append(event_id)
        if done:
            self.client.xack(stream, self.config.group, *done)
        return len(done)

    def handle_event(self, queue_key: str, parsed: QueueEvent) -> int:
        """Push the deliveries one event causes; returns how many were pushed."""
        event, job_id, event_id = parsed.event, parsed.job_id, parsed.id
        if event == EventName.ADDED and job_id:
            # A new job of this id: drop a record an earlier job of it left.
            registry.bound_job_webhook(self.client, self.keys, queue_key, job_id)
        if event not in defaults.WEBHOOK_EVENTS or not job_id:
            return 0
        targets: list[tuple[str, str]] = []
        record = registry.bound_job_webhook(self.client, self.keys, queue_key, job_id)
        if record and event in record.get("events", defaults.WEBHOOK_EVENTS):
            targets.append(("job", record["url"]))
        for sub in self.subs.get(queue_key, []):
            if event in sub.get("events", ()):
                targets.append((f"sub{sub['id']}", sub["url"]))
        if not targets:
            return 0
        payload = _payload(queue_key, parsed)
        event_ms = payload["timestamp"]
        pushed = 0
        for target, url in targets:
            ident = delivery_id(queue_key, event_id, target)
            entry = {
                "delivery_id": ident,
                "queue_key": queue_key,
                "job_id": job_id,
                "event": event,
                "event_id": event_id,
                "target": target,
                "url": url,
                "payload": {"id": ident, **payload},
            }
            status = self.outbox.push(entry, event_ms, self.config.progress_interval_ms)
            pushed += status == "pushed"
        return pushed

    def run(self, stop: threading.Event) -> None:
        """Step until stopped; Redis outages (unreachable, out of memory,
        read-only...) are waited out and logged once each."""
        outage = Outage("webhook reader", log)
        failures = 0
        while not stop.is_set():
            began = time.monotonic()
            try:
                self.step()
                if self.streams or self._refreshed >= began:  # Redis answered
                    outage.succeeded()
                failures = 0
            except Exception as exc:  # noqa: BLE001 - keep reading; the entry stays pending
                if recoverable(exc):
                    stop.wait(outage.failed(exc))
                    continue
                log.exception("webhook reader: step failed; retrying")
                failures += 1
                stop.wait(backoff_s(failures))


class Dispatcher:
    """The stream reader (a thread) and the delivery worker, together."""

    def __init__(
        self, config: DispatcherConfig, resolver: ssrf.Resolver = ssrf.system_resolver
    ) -> None:
        self.config = config
        self.client = sync_client(config.redis_url)
        self.keys = ApiKeys(config.namespace)
        options = DeliveryOptions(
            config.attempts, config.backoff_ms, config.record_ttl_s
        )
        self.delivery_queue = Queue(config.delivery_queue, self.client, config.prefix)
        self.outbox = Outbox(self.client, self.keys, self.delivery_queue, options)
        self.reader = StreamReader(config, self.client, self.outbox)
        self.deliverer = Deliverer(
            self.client,
            self.keys,
            self.outbox,
            config.policy,
            config.timeout_s,
            config.record_ttl_s,
            resolver,
        )
        self.worker = Worker(
            config.delivery_queue,
            self.deliverer,
            connection=config.redis_url,
            prefix=config.prefix,
            concurrency=config.concurrency,
            lock_duration=config.lock_duration_ms,
            stalled_interval=config.lock_duration_ms,
            worker_name=f"webhooks-{config.consumer}",
        )
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def _start_reader(self) -> None:
        if self.config.read:
            thread = threading.Thread(
                target=self.reader.run,
                args=(self._stop,),
                name="webhook-reader",
                daemon=True,
            )
            thread.start()
            self._threads.append(thread)

    def run(self) -> None:
        """Run until SIGTERM/SIGINT (the worker's handlers), then stop cleanly."""
        self._start_reader()
        try:
            if self.config.deliver:
                self.worker.run()
            else:
                while not self._stop.wait(1.0):
                    pass
        finally:
            self.stop()

    def alive(self) -> bool:
        """Whether its threads (the reader, when it reads) still run."""
        return all(t.is_alive() for t in self._threads)

    def start(self) -> Dispatcher:
        """Run in background threads (tests, embedding); `stop()` ends it."""
        self._start_reader()
        if self.config.deliver:
            thread = threading.Thread(
                target=self.worker.run, name="webhook-worker", daemon=True
            )
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop reading, let running deliveries finish, close."""
        self._stop.set()
        self.worker.close()
        for thread in self._threads:
            thread.join(timeout)
        if self.reader.group_reads is not None and not any(
            t.is_alive() for t in self._threads
        ):
            self.reader.group_reads.close()
        self._threads.clear()
