"""The supervisor of one host: worker processes per GPU (or per GPU and
queue, process_per_gpu off; reconcile.py says which are wanted), restarted
with backoff, scaled to the desired counts in Redis, drained on SIGTERM.

It is a plain loop (rq's worker pool is the model): one place installs
signal handlers, the reap loop polls children, a crashed child restarts
after a growing delay, and more than `max_restarts` crashes within
`restart_window_s` mark it failed (an OTP-style restart intensity); a child
that exits with EXIT_RECYCLE (VRAM it could not give back kept its jobs out)
restarts at once, a crash only past `max_restarts` recycles in the window. Every
heartbeat interval it vouches in Redis for its host and, in one ZADD, for
the children whose process runs and rewrote its liveness file lately
(heartbeat.py); the host record (GPU snapshots, limits, children) and the
records of children without a live process (restarting or failed) are
rewritten when they change or every RECORD_REFRESH_S. Desired counts are
re-read when a writer announces a change on the host's control stream
(control.py), and every DESIRED_SAFETY_S.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import threading
import time
from enum import Enum
from pathlib import Path
from typing import Any

import redis

from queues.connection import sync_from_url

from . import defaults
from .children import Child, ChildState, child_entries, child_records, spawn
from .clock import now_ms
from .config import SupervisorConfig
from .control import ControlThread
from .desired import DesiredCounts
from .heartbeat import (
    queue_record,
    queue_removal,
    queue_trim,
    queue_vouch,
    settled,
)
from .keys import BullpenKeys
from .liveness import LIVENESS_INTERVAL_S, LivenessFile, liveness_dir, touch_owner
from .planning import plan_gpus, queue_limits
from .pools import pool_planner
from .probe import GpuProbe, make_probe
from .reconcile import Want, child_keys, wanted_processes
from .series import SeriesSampler

log = logging.getLogger("gpu_workers.supervisor")


class SupervisorState(str, Enum):  # noqa: UP042 - house style (JobState)
    """Where the supervisor is in its life."""

    STARTING = "starting"
    RUNNING = "running"
    DRAINING = "draining"
    STOPPED = "stopped"


class Supervisor:
    """Runs and watches this host's GPU worker processes."""

    def __init__(self, config: SupervisorConfig, probe: GpuProbe | None = None) -> None:
        self.config = config
        self.probe = (
            probe if probe is not None else make_probe(config.gpus, config.host)
        )
        self.keys = BullpenKeys(config.namespace)
        self.redis = sync_from_url(config.redis_url, decode_responses=True)
        self.state = SupervisorState.STARTING
        self.children: dict[tuple[str, str], Child] = {}
        self._stop = threading.Event()
        self.liveness = config.liveness_file and LivenessFile(
            config.liveness_file, LIVENESS_INTERVAL_S
        )
        self.gpus = self.probe.devices()
        self._plan = plan_gpus(config, self.gpus, self.probe)
        self.desired = DesiredCounts(
            self.redis, self.keys.desired(config.host), config.queues, self._plan
        )
        self.sampler = SeriesSampler(self.redis, config.namespace, host=config.host)
        self.pools = pool_planner(self.redis, self.keys, config)  # None: off
        #: Pushes of desired-count changes (started with the loop).
        self.control = ControlThread(self.redis, [self.keys.control_host(config.host)])
        #: The children's liveness files (spec.alive_file), one per process.
        self.alive_dir = liveness_dir()
        #: Desired counts last read (reconciled locally between reads).
        self._desired: dict[str, dict[str, int]] | None = None
        #: The host record last written (settled) and when to rewrite it.
        self._written: str | None = None
        self._refresh_at = 0.0
        self._trim_at = 0.0

    def limits(self) -> dict[str, dict[str, Any]]:
        """What set_desired() validates against, per queue."""
        return queue_limits(self.config.queues, self._plan)

    # --- lifecycle --------------------------------------------------------------------
    def install_signal_handlers(self) -> None:
        """SIGTERM and SIGINT drain (the only place signals are handled)."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda signum, frame: self.stop())

    def stop(self) -> None:
        """Ask the loop to drain and exit (safe from a signal handler or thread)."""
        self._stop.set()

    def run(self, install_signals: bool = True) -> int:
        """Supervise until stopped and drained; returns the exit status."""
        if install_signals and threading.current_thread() is threading.main_thread():
            self.install_signal_handlers()
        self._start()
        interval = defaults.REAP_INTERVAL_S
        next_reconcile = next_beat = next_sample = next_read = 0.0
        try:
            while True:
                now = time.monotonic()
                self._reap(now)
                if self._stop.is_set() and self.state is not SupervisorState.DRAINING:
                    self._begin_drain(now)
                if self.state is SupervisorState.DRAINING:
                    if self._drain_step(now):
                        break
                else:
                    pushed = self.control.pushed.is_set()
                    if pushed or now >= next_read:  # desired counts from Redis
                        self.control.pushed.clear()
                        self.control.take()
                        self._reconcile(now, read=True)
                        next_read = now + defaults.DESIRED_SAFETY_S
                        next_reconcile = now + self.config.reconcile_interval_s
                    elif now >= next_reconcile:  # the last ones read, locally
                        self._reconcile(now, read=False)
                        next_reconcile = now + self.config.reconcile_interval_s
                    self._restart_due(now)
                if now >= next_beat:
                    self._publish()
                    next_beat = now + self.config.heartbeat_interval_s
                    touch_owner(self.alive_dir)  # never swept while we run
                if now >= next_sample:  # the charts' series (series/)
                    self.sampler.tick_quietly(
                        (q.prefix, q.queue) for q in self.config.queues
                    )
                    next_sample = now + defaults.SERIES_TICK_S
                if self.pools is not None:  # warm pools, every POOL_TICK_S
                    self.pools.tick_quietly(time.time())
                if self.liveness:
                    self.liveness.beat(now)
                time.sleep(interval)
        finally:
            self._shutdown()
        return 0

    def _start(self) -> None:
        cfg = self.config
        if not self.gpus:
            log.warning(
                "host %s: CPU-only mode (%s): no GPU worker processes will start",
                cfg.host,
                getattr(self.probe, "reason", "no GPUs"),
            )
        self.control.start()
        for q in cfg.queues:
            self.desired.seed(q, self.desired.initial(q))
        log.info(
            "supervisor on host %s: %d GPU(s) (%s), queues %s",
            cfg.host,
            len(self.gpus),
            self.probe.kind,
            [q.key for q in cfg.queues],
        )
        self.state = SupervisorState.RUNNING
        self._publish()

    # --- children ---------------------------------------------------------------------
    def alive_file(self, child: Child) -> Path:
        """The liveness file a child's process rewrites every beat."""
        name = child.worker_id(self.config.host).replace(":", "_").replace("*", "gpu")
        return self.alive_dir / name

    def _spawn(self, child: Child, slots: dict[str, int]) -> None:
        alive = self.alive_file(child)
        alive.unlink(missing_ok=True)  # a former process's proves nothing
        spawn(child, self.config, slots, str(alive))
        log.info(
            "started %s (pid %s, %d restart(s))",
            self._id(child),
            child.pid,
            child.restarts,
        )

    def _reap(self, now: float) -> None:
        for child in self.children.values():
            if child.proc is None:
                continue
            code = child.proc.poll()
            if code is None:
                continue
            child.proc = None
            child.last_exit = code
            if child.state is ChildState.DRAINING:
                child.state = ChildState.STOPPED
                log.info("%s drained (exit %d)", self._id(child), code)
            elif code == defaults.EXIT_RECYCLE:
                if child.recycled(code, now, self.config):
                    log.error("%s: %s", self._id(child), child.reason)
                else:
                    log.warning("%s %s", self._id(child), child.reason)
                self._publish_child(child)
            else:
                self._on_crash(child, code, now)

    def _on_crash(self, child: Child, code: int, now: float) -> None:
        if child.crashed(code, now, self.config):
            log.error("%s: %s", self._id(child), child.reason)
        else:
            log.warning("%s %s", self._id(child), child.reason)
        self._publish_child(child)

    def _restart_due(self, now: float) -> None:
        for child in self.children.values():
            if child.state is ChildState.BACKOFF and now >= child.restart_at:
                child.restarts += 1
                slots = {q.key: self.desired.slots(q) for q in child.served}
                self._spawn(child, slots)
                self._publish_child(child)

    def _reconcile(self, now: float, read: bool = True) -> None:
        """Start wanted processes; drain the ones no longer wanted, and a GPU
        process whose set of queues changed (it restarts with the new set).
        `read`: the desired counts from Redis, else the last ones read."""
        if read or self._desired is None:
            fresh = self.desired.read()
            if fresh is not None:
                self._desired = fresh
        desired = self._desired
        if desired is None:
            return
        wanted = wanted_processes(self.config, self._plan, desired)
        for slot, want in wanted.items():
            child = self.children.get(slot)
            if child is None:
                child = self.children[slot] = want.child()
            elif child_keys(child) != want.keys:
                self._regroup(child, want, now)
            if child.state is ChildState.STOPPED:
                child.crashes.clear()
                child.restarts = 0
                self._spawn(child, want.slots)
        for slot, child in list(self.children.items()):
            if slot in wanted:
                continue
            if child.state is ChildState.RUNNING:
                self._terminate(child, now)
            elif child.state in (
                ChildState.BACKOFF,
                ChildState.FAILED,
                ChildState.STOPPED,
            ):
                del self.children[slot]
                self._remove_record(child)
        for child in self.children.values():
            self._kill_if_overdue(child, now)

    def _regroup(self, child: Child, want: Want, now: float) -> None:
        """A GPU's wanted queues changed: drain a running process (restarted
        with the new set once it stopped); one without a process starts anew."""
        if child.state is ChildState.RUNNING:
            self._terminate(child, now)
        elif child.state in (ChildState.BACKOFF, ChildState.FAILED):
            self._remove_record(child)
            child.state = ChildState.STOPPED
        want.regroup(child)

    def _terminate(self, child: Child, now: float) -> None:
        """SIGTERM: the worker stops claiming and finishes its running jobs."""
        assert child.proc is not None
        log.info("draining %s (pid %d)", self._id(child), child.proc.pid)
        child.state = ChildState.DRAINING
        child.drain_deadline = (
            now + self.config.drain_timeout_s + defaults.DRAIN_KILL_GRACE_S
        )
        try:
            child.proc.send_signal(signal.SIGTERM)
        except ProcessLookupError:
            pass

    def _kill_if_overdue(self, child: Child, now: float) -> None:
        if (
            child.state is ChildState.DRAINING
            and child.proc is not None
            and now > child.drain_deadline
        ):
            log.warning("%s did not drain in time; killing it", self._id(child))
            child.proc.kill()

    # --- draining the host ------------------------------------------------------------
    def _begin_drain(self, now: float) -> None:
        log.info(
            "supervisor on %s: draining %d worker(s)",
            self.config.host,
            sum(1 for c in self.children.values() if c.proc is not None),
        )
        self.state = SupervisorState.DRAINING
        for child in self.children.values():
            if child.state is ChildState.RUNNING:
                self._terminate(child, now)
            elif child.state is ChildState.BACKOFF:
                child.state = ChildState.STOPPED
        self._publish()

    def _drain_step(self, now: float) -> bool:
        """True once no child process is left."""
        for child in self.children.values():
            self._kill_if_overdue(child, now)
        return all(c.proc is None for c in self.children.values())

    def _shutdown(self) -> None:
        for child in self.children.values():
            if child.proc is not None:
                child.proc.kill()
                child.proc.wait()
                child.proc = None
        try:
            pipe = self.redis.pipeline(transaction=False)
            for child in self.children.values():
                for wid in child.worker_ids(self.config.host):
                    queue_removal(pipe, self.keys, "worker", wid)
            queue_removal(pipe, self.keys, "host", self.config.host)
            pipe.execute()
        except redis.RedisError as exc:
            log.warning("could not remove the host's records: %r", exc)
        self.state = SupervisorState.STOPPED
        self.control.stop()
        shutil.rmtree(self.alive_dir, ignore_errors=True)
        if self.liveness:
            self.liveness.remove()
        self.redis.close()
        self.probe.close()
        log.info("supervisor on %s stopped", self.config.host)

    # --- publishing -------------------------------------------------------------------
    def _id(self, child: Child) -> str:
        return child.worker_id(self.config.host)

    def host_record(self) -> dict[str, Any]:
        """The supervisor's heartbeat: state, GPU readings, limits, children."""
        gpus = []
        for g in self.gpus:
            try:
                gpus.append(self.probe.snapshot(g.uuid).to_dict())
            except Exception as exc:  # noqa: BLE001 - report, do not die
                gpus.append(
                    {
                        "uuid": g.uuid,
                        "index": g.index,
                        "name": g.name,
                        "simulated": g.simulated,
                        "memory_total_bytes": g.memory_total_bytes,
                        "error": str(exc),
                    }
                )
        return {
            "host": self.config.host,
            "pid": os.getpid(),
            "state": self.state.value,
            "mode": self.probe.kind,
            "simulated": self.probe.simulated,
            "gpus": gpus,
            "queues": self.limits(),
            "children": [
                entry
                for c in self.children.values()
                for entry in child_entries(c, self.config.host)
            ],
            "refresh_s": defaults.RECORD_REFRESH_S,
            "ts_ms": now_ms(),
        }

    def _publish_child(self, child: Child) -> None:
        if child.state not in (ChildState.BACKOFF, ChildState.FAILED):
            return
        try:
            pipe = self.redis.pipeline(transaction=False)
            for wid, record in child_records(child, self.config.host):
                queue_record(
                    pipe, self.keys, "worker", wid, record, self.config.heartbeat_ttl_s
                )
            pipe.execute()
        except redis.RedisError as exc:
            log.warning("could not publish %s: %r", self._id(child), exc)

    def _remove_record(self, child: Child) -> None:
        try:
            pipe = self.redis.pipeline(transaction=False)
            for wid in child.worker_ids(self.config.host):
                queue_removal(pipe, self.keys, "worker", wid)
            pipe.execute()
        except redis.RedisError:
            pass

    def vouched(self) -> dict[str, int]:
        """Worker id -> index expiry (ms) for each child that shows itself
        alive: its process runs and rewrote its liveness file, the expiry
        counted from that write (so a hung worker drops out a TTL after its
        last beat); a child without a process (restarting, failed) from now."""
        ttl_ms = int(self.config.heartbeat_ttl_s * 1000)
        out: dict[str, int] = {}
        for child in self.children.values():
            if child.state in (ChildState.BACKOFF, ChildState.FAILED):
                expiry = now_ms() + ttl_ms
            elif child.proc is not None:
                try:
                    seen = self.alive_file(child).stat().st_mtime
                except OSError:
                    continue  # not beating yet (it lists itself once it does)
                expiry = int(seen * 1000) + ttl_ms
            else:
                continue
            for wid in child.worker_ids(self.config.host):
                out[wid] = expiry
        return out

    def _publish(self) -> None:
        """One host beat: SET the host record only when it changed (or is
        due a refresh), ZADD the host, ONE ZADD for every vouched child, and
        the index trims every INDEX_TRIM_S."""
        now = time.monotonic()
        ttl = self.config.heartbeat_ttl_s
        record = self.host_record()
        seen = settled(record)
        changed = seen != self._written
        refresh = now >= self._refresh_at
        try:
            pipe = self.redis.pipeline(transaction=False)
            host = self.config.host
            if changed or refresh:
                queue_record(pipe, self.keys, "host", host, record, ttl, changed)
            else:
                queue_vouch(pipe, self.keys, "host", {host: now_ms() + int(ttl * 1000)})
            if refresh:  # records of children without a process
                for child in self.children.values():
                    if child.state in (ChildState.BACKOFF, ChildState.FAILED):
                        for wid, rec in child_records(child, host):
                            queue_record(
                                pipe, self.keys, "worker", wid, rec, ttl, False
                            )
            queue_vouch(pipe, self.keys, "worker", self.vouched())
            if now >= self._trim_at:
                queue_trim(pipe, self.keys)
            pipe.execute()
        except redis.RedisError as exc:
            log.warning("heartbeat failed: %r", exc)
            return
        self._written = seen
        if changed or refresh:
            self._refresh_at = now + defaults.RECORD_REFRESH_S
        if now >= self._trim_at:
            self._trim_at = now + defaults.INDEX_TRIM_S


def run_supervisor(config: SupervisorConfig, install_signals: bool = True) -> int:
    """Build a Supervisor from settings and run it (the runworkers entry point)."""
    return Supervisor(config).run(install_signals)
