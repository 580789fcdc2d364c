"""Queue names whose slots sit on different primaries of the test cluster."""

from __future__ import annotations

import uuid
from typing import Any

from queues.cluster import check_queue_slot


def slot_owners(r: Any) -> dict[int, str]:
    """Each slot's primary, as `host:port`, from CLUSTER SLOTS (as redis-py's
    cluster client parses it: {(first, last): {"primary": (host, port)}})."""
    owners: dict[int, str] = {}
    for (first, last), nodes in r.execute_command("CLUSTER SLOTS").items():
        host, port = nodes["primary"][:2]
        for slot in range(int(first), int(last) + 1):
            owners[slot] = f"{host}:{port}"
    return owners


def node_of(r: Any, prefix: str, name: str) -> str:
    """The primary holding queue `name`'s slot."""
    return slot_owners(r)[check_queue_slot(prefix, name)]


def names_on_different_primaries(r: Any, tags: str, prefix: str = "bull") -> list[str]:
    """One fresh queue name per letter of `tags` (`{a…}`, `{b…}`...), each
    on a primary none of the others is on."""
    owners = slot_owners(r)
    names: list[str] = []
    taken: set[str] = set()
    for tag in tags:
        for _ in range(1000):
            name = "{" + tag + uuid.uuid4().hex[:8] + "}"
            node = owners[check_queue_slot(prefix, name)]
            if node not in taken:
                names.append(name)
                taken.add(node)
                break
        else:
            raise AssertionError(f"no free primary for a {tag} queue")
    return names
