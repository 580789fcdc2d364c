"""The test servers' port: picked free, then bound by daphne a moment later;
a port something else took in between is picked again (tests/helpers.py
serve_on_free_port), never served by the wrong process."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.dashboard.daphne_helpers import daphne
from tests.helpers import PORT_TAKEN, first_pick_taken


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
