"""The supervisor of one host: worker processes per GPU (or per GPU and
queue, process_per_gpu off; reconcile.py says which are wanted), restarted
with backoff, scaled to the desired counts in Redis, drained on SIGTERM.

It is a plain loop (rq's worker pool is the model): one place installs
signal handlers, the reap loop polls children, a crashed child restarts
after a growing delay, and more than `max_restarts` crashes within
`restart_window_s` mark it failed (an OTP-style restart intensity). Every
heartbeat interval it publishes the host record (GPU snapshots, limits,
children) and records for children that have no live process (restarting
or failed), so the read model shows them too.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from enum import Enum
from typing import Any

import redis

from queues.connection import sync_from_url

from . import defaults
from .children import Child, ChildState, child_entries, child_records, spawn
from .clock import now_ms
from .config import SupervisorConfig
from .desired import DesiredCounts
from .heartbeat import queue_heartbeat, queue_removal
from .keys import BullpenKeys
from .liveness import LIVENESS_INTERVAL_S, LivenessFile
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
        self.sampler = SeriesSampler(self.redis, config.namespace)
        self.pools = pool_planner(self.redis, self.keys, config)  # None: off

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
        next_reconcile = next_beat = next_sample = 0.0
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
                    if now >= next_reconcile:
                        self._reconcile(now)
                        next_reconcile = now + self.config.reconcile_interval_s
                    self._restart_due(now)
                if now >= next_beat:
                    self._publish()
                    next_beat = now + self.config.heartbeat_interval_s
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
    def _spawn(self, child: Child, slots: dict[str, int]) -> None:
        spawn(child, self.config, slots)
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

    def _reconcile(self, now: float) -> None:
        """Start wanted processes; drain the ones no longer wanted, and a GPU
        process whose set of queues changed (it restarts with the new set)."""
        desired = self.desired.read()
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
            "ts_ms": now_ms(),
        }

    def _publish_child(self, child: Child) -> None:
        if child.state not in (ChildState.BACKOFF, ChildState.FAILED):
            return
        try:
            pipe = self.redis.pipeline(transaction=False)
            for wid, record in child_records(child, self.config.host):
                queue_heartbeat(
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

    def _publish(self) -> None:
        try:
            pipe = self.redis.pipeline(transaction=False)
            queue_heartbeat(
                pipe,
                self.keys,
                "host",
                self.config.host,
                self.host_record(),
                self.config.heartbeat_ttl_s,
            )
            for child in self.children.values():
                if child.state not in (ChildState.BACKOFF, ChildState.FAILED):
                    continue
                for wid, record in child_records(child, self.config.host):
                    queue_heartbeat(
                        pipe,
                        self.keys,
                        "worker",
                        wid,
                        record,
                        self.config.heartbeat_ttl_s,
                        stream=False,
                    )
            pipe.execute()
        except redis.RedisError as exc:
            log.warning("heartbeat failed: %r", exc)


def run_supervisor(config: SupervisorConfig, install_signals: bool = True) -> int:
    """Build a Supervisor from settings and run it (the runworkers entry point)."""
    return Supervisor(config).run(install_signals)
