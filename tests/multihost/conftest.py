"""The network of the multi-host tests: made per test, always torn down,
skipped only where network namespaces cannot be made."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import pytest

from .netns import NetnsUnavailable, Network


@pytest.fixture
def make_network() -> Iterator[Callable[[Sequence[str]], Network]]:
    """Start a Network of the named hosts; every one made is closed afterwards."""
    made: list[Network] = []

    def make(hosts: Sequence[str]) -> Network:
        network = Network(hosts)
        made.append(network)
        try:
            return network.start()
        except NetnsUnavailable as exc:
            pytest.skip(
                "network namespaces cannot be made here (they need root, or "
                f"CAP_SYS_ADMIN and CAP_NET_ADMIN, and iproute2's `ip`): {exc}"
            )

    yield make
    for network in made:
        network.close()
