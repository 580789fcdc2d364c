"""Packing commands: hiredis for redis-py's asyncio connections, and a sync
packer that sends text read back with `surrogateescape` as its original
bytes (see connection.py)."""

from __future__ import annotations

from typing import Any

import redis
from redis._parsers import Encoder

HIREDIS_PACK: Any = None
try:
    import hiredis

    HIREDIS_PACK = hiredis.pack_command
except ImportError:  # hiredis is optional: redis-py's own packer then
    pass

#: Argument types hiredis packs exactly as redis-py does (not bool, float).
_PACKABLE = frozenset({str, bytes, int})


class HiredisPacking:
    """An asyncio connection that packs commands with hiredis, as redis-py's
    sync connections already do; its asyncio ones pack in Python (about
    20 us for a worker's 23-argument EVALSHA, against 2 us). Whatever hiredis
    would pack differently (floats, bools, a command name with a space, text
    that is not strict UTF-8) goes through redis-py's packer."""

    def pack_command(self, *args: Any) -> list[bytes]:
        first = args[0] if args else None
        if (
            type(first) is str
            and " " not in first
            and _PACKABLE.issuperset(map(type, args))
        ):
            try:
                return [HIREDIS_PACK(args)]
            except UnicodeEncodeError:  # surrogateescape'd bytes
                pass
        return super().pack_command(*args)  # type: ignore[misc, no-any-return]


_packing_classes: dict[type, type] = {}


def hiredis_packing(cls: type) -> type:
    """`cls` packing with hiredis (one subclass per connection class)."""
    if cls not in _packing_classes:
        name = cls.__name__  # kept: _kwargs_of tells TLS by it
        _packing_classes[cls] = type(name, (HiredisPacking, cls), {})
    return _packing_classes[cls]


class SurrogateSafePacker:
    """The sync twin of `HiredisPacking`: redis-py's sync connections pack with
    hiredis, which encodes text as strict UTF-8, so a key read back with
    surrogateescape (a queue name with non-UTF-8 bytes, written by another
    client) could not be sent again. Such a command goes through redis-py's
    Python packer, which encodes it back to the original bytes."""

    def __init__(self) -> None:
        self._hiredis: Any = None
        if HIREDIS_PACK is not None:
            self._hiredis = redis.connection.HiredisRespSerializer()
        encoder: Any = Encoder("utf-8", "surrogateescape", True)  # type: ignore[no-untyped-call]
        self._python: Any = redis.connection.PythonRespSerializer(6000, encoder.encode)

    def pack(self, *args: Any) -> list[bytes]:
        """The command as RESP, in one or more chunks."""
        if self._hiredis is not None:
            try:
                return self._hiredis.pack(*args)  # type: ignore[no-any-return]
            except UnicodeEncodeError:
                pass
        return self._python.pack(*args)  # type: ignore[no-any-return]


def surrogate_safe(client: redis.Redis) -> redis.Redis:
    """`client` packing surrogateescape'd text (on connections made from now:
    a client is handed over before it has connected)."""
    kwargs = client.connection_pool.connection_kwargs
    if kwargs.get("command_packer") is None:
        kwargs["command_packer"] = SurrogateSafePacker()
    return client
