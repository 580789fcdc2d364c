"""The test servers' port: picked free, then bound by daphne a moment later;
a port something else took in between is picked again (tests/helpers.py
serve_on_free_port), never served by the wrong process."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.dashboard.daphne_helpers import daphne
from tests.helpers import PORT_TAKEN, first_pick_taken, quiet_port


def test_a_port_taken_before_daphne_binds_it_is_picked_again(
    tmp_path: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first pick is a port another process listens on: daphne exits
    saying it is taken, and starts again on the next pick, which it serves."""
    with first_pick_taken(monkeypatch) as picks:
        taken = picks[0]
        with daphne(tmp_path, redis_url) as server:
            assert not server.url.endswith(f":{taken}")
            assert picks == []
            text = server.log_text()
            assert PORT_TAKEN not in text  # the log of the start that served
            assert f"Listening on TCP address {server.url[7:]}" in text


def test_quiet_ports_come_from_below_the_ephemeral_range() -> None:
    """make run's tests cannot re-pick (the port is make run's own): their
    port comes from below the kernel's ephemeral range, which port-0 binds
    and outgoing connections draw from, and is free when picked."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    picks = {quiet_port() for _ in range(20)}
    assert all(1024 <= p < low for p in picks), (low, picks)
    assert len(picks) > 1  # drawn at random, not one fixed port
    with socket.socket() as s:
        s.bind(("127.0.0.1", picks.pop()))
