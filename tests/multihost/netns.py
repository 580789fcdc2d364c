"""Several hosts on one machine: a network namespace per host, each joined to
one bridge by a veth pair, with an address in 10.231.N.0/24 (N picked free
per run). The root namespace joins the bridge too (as .1), so a test reaches
every host directly. Namespace names are unique per run, and `close()`
removes them and ends every process that ran inside, whatever happened.

`cut(host)` takes the host's port on the bridge down: whatever it sends or
is sent vanishes. Nobody answers with a TCP RST or an ICMP error, and every
host knows every other's link address for good (permanent neighbour
entries), so no failed ARP lookup tells it "no route to host" either: its
connections hang, as across a routed network that lost a link, until
`restore(host)` brings the port back and they carry on.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import uuid
from collections.abc import Sequence
from typing import Any

SUBNET_PREFIX = "10.231"
#: Seconds a process in a namespace gets after SIGTERM at close() before SIGKILL.
STOP_GRACE_S = 3.0


class NetnsUnavailable(RuntimeError):
    """Raised when this machine cannot make network namespaces (not root:
    no CAP_SYS_ADMIN and CAP_NET_ADMIN; or no `ip`)."""


def _ip(*args: str) -> str:
    done = subprocess.run(
        ["ip", *args], capture_output=True, text=True, check=False, timeout=10
    )
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def _free_subnet() -> str:
    """`10.231.N` that no address or route of the root namespace uses."""
    used = _ip("-4", "-o", "addr") + _ip("-4", "route")
    choices = list(range(256))
    random.shuffle(choices)
    for n in choices:
        if f"{SUBNET_PREFIX}.{n}." not in used:
            return f"{SUBNET_PREFIX}.{n}"
    raise RuntimeError(f"every {SUBNET_PREFIX}.N.0/24 is in use here")


class Network:
    """Hosts, each a network namespace with one address, on one bridge."""

    def __init__(self, hosts: Sequence[str]) -> None:
        self.tag = uuid.uuid4().hex[:6]
        self.hosts = list(hosts)
        self.subnet = ""
        self._switch = f"bp{self.tag}-switch"
        self._root_if = f"bp{self.tag}root"
        self._made: list[str] = []
        self._procs: list[subprocess.Popen[Any]] = []

    def namespace(self, host: str) -> str:
        """The namespace name of `host`."""
        return f"bp{self.tag}-{host}"

    def address(self, host: str) -> str:
        """The IPv4 address of `host` (the root namespace is `.1`)."""
        return f"{self.subnet}.{10 + self.hosts.index(host)}"

    def _port(self, host: str) -> str:
        return f"p{self.hosts.index(host)}"

    def _add_namespace(self, name: str) -> None:
        try:
            _ip("netns", "add", name)
        except (RuntimeError, OSError) as exc:
            raise NetnsUnavailable(str(exc)) from exc
        self._made.append(name)
        _ip("-n", name, "link", "set", "lo", "up")

    def start(self) -> Network:
        """Make the namespaces, the bridge and the links, all up."""
        try:
            self.subnet = _free_subnet()
        except OSError as exc:
            raise NetnsUnavailable(f"no `ip` command: {exc}") from exc
        self._add_namespace(self._switch)
        sw = self._switch
        _ip("-n", sw, "link", "add", "br0", "type", "bridge")
        _ip("-n", sw, "link", "set", "br0", "up")
        for host in self.hosts:
            ns = self.namespace(host)
            self._add_namespace(ns)
            port = self._port(host)
            _ip(
                "link", "add", "eth0", "netns", ns,
                "type", "veth", "peer", "name", port, "netns", sw,
            )  # fmt: skip
            _ip("-n", ns, "addr", "add", f"{self.address(host)}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", sw, "link", "set", port, "master", "br0", "up")
        _ip(
            "link", "add", self._root_if,
            "type", "veth", "peer", "name", "root", "netns", sw,
        )  # fmt: skip
        _ip("addr", "add", f"{self.subnet}.1/24", "dev", self._root_if)
        _ip("link", "set", self._root_if, "up")
        _ip("-n", sw, "link", "set", "root", "master", "br0", "up")
        self._pin_neighbours()
        return self

    def _pin_neighbours(self) -> None:
        """Every host learns every other's link address for good, so a cut
        leaves no failed ARP lookup to answer "no route to host"."""
        addresses = {f"{self.subnet}.1": _mac([], self._root_if)}
        for host in self.hosts:
            addresses[self.address(host)] = _mac(["-n", self.namespace(host)], "eth0")
        for host in self.hosts:
            ns = self.namespace(host)
            for address, mac in addresses.items():
                if address != self.address(host):
                    _ip(
                        "-n", ns, "neigh", "replace", address, "lladdr", mac,
                        "dev", "eth0", "nud", "permanent",
                    )  # fmt: skip

    def popen(
        self, host: str, argv: Sequence[str], **kwargs: Any
    ) -> subprocess.Popen[Any]:
        """Start `argv` inside `host` (in its own session); close() ends it."""
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        proc = subprocess.Popen(
            ["ip", "netns", "exec", self.namespace(host), *argv],
            start_new_session=True,
            **kwargs,
        )
        self._procs.append(proc)
        return proc

    def cut(self, host: str) -> None:
        """Partition `host` from every other: its bridge port goes down."""
        _ip("-n", self._switch, "link", "set", self._port(host), "down")

    def restore(self, host: str) -> None:
        """Join `host` to the network again."""
        _ip("-n", self._switch, "link", "set", self._port(host), "up")

    def _pids_inside(self) -> list[int]:
        pids: list[int] = []
        for ns in self._made:
            try:
                pids += [int(p) for p in _ip("netns", "pids", ns).split()]
            except RuntimeError:
                pass
        return pids

    def close(self) -> None:
        """End every process started here, last started first (SIGTERM, then
        SIGKILL to its process group after STOP_GRACE_S), and any other still
        inside a namespace of this network; then delete the namespaces (their
        links go with them)."""
        for proc in reversed(self._procs):
            if proc.poll() is None:
                proc.terminate()  # a supervisor then drains its own workers
                try:
                    proc.wait(STOP_GRACE_S)
                except subprocess.TimeoutExpired:
                    pass
            _signal_group(proc.pid, signal.SIGKILL)
        # Whatever those started in a session of its own, still in our
        # namespaces (all of these are ours: the names are this run's).
        for pid in self._pids_inside():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for proc in self._procs:
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
        for ns in reversed(self._made):
            try:
                _ip("netns", "del", ns)
            except RuntimeError:
                pass
        self._made.clear()
        try:
            _ip("link", "del", self._root_if)
        except RuntimeError:
            pass  # went with the switch namespace, or was never made


def _mac(where: list[str], interface: str) -> str:
    """The link address of `interface` (`where`: ip's `-n NS`, or nothing)."""
    shown = _ip(*where, "-o", "link", "show", interface)
    return shown.split("link/ether ")[1].split()[0]


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
