"""The one Lua loader (queues/scripts.py): scripts of any package directory,
their `includes/` inlined once, registered per client, sent as EVALSHA and
loaded again after a SCRIPT FLUSH (sync, asyncio and in a pipeline)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis

from queues.scripts import NAMES, QUEUE_LUA, LuaDir, Scripts, source


@pytest.fixture
def lua(tmp_path: Path) -> LuaDir:
    """A package's own `lua/`: one script pulling two includes, one twice."""
    (tmp_path / "includes").mkdir()
    (tmp_path / "includes" / "twice.lua").write_text(
        "local function twice(x) return 2 * x end\n"
    )
    (tmp_path / "includes" / "both.lua").write_text(
        '--- @include "twice"\nlocal function both(x) return twice(x) + 1 end\n'
    )
    (tmp_path / "double.lua").write_text(
        '--- @include "twice"\n--- @include "both"\n'
        "redis.call('SET', KEYS[1], both(tonumber(ARGV[1])))\n"
        "return redis.call('GET', KEYS[1])\n"
    )
    return LuaDir(tmp_path, ("double",))


def test_any_directory_with_its_includes_inlined_once(lua: LuaDir) -> None:
    """A script's includes come from its own directory, each inlined once."""
    text = lua.source("double")
    assert text.count("local function twice") == 1
    assert text.count("local function both") == 1
    assert "@include" not in text
    with pytest.raises(KeyError):
        lua.source("missing")


def test_registered_once_per_client_and_recovers_after_script_flush(
    lua: LuaDir, r: redis.Redis, qname: str
) -> None:
    """`on` registers a client's scripts once; a call after SCRIPT FLUSH
    (NOSCRIPT) loads the script again, alone and in a pipeline."""
    assert lua.on(r) is lua.on(r)
    assert lua.register(r) is not lua.on(r)
    double = lua.script(r, "double")
    assert double(keys=[qname], args=[3]) == "7"
    r.script_flush()
    assert double(keys=[qname], args=[4]) == "9"
    r.script_flush()
    pipe = r.pipeline()
    double(keys=[qname], args=[5], client=pipe)
    assert pipe.execute() == ["11"]


def test_asyncio_client_recovers_after_script_flush(
    lua: LuaDir, redis_url: str, qname: str
) -> None:
    """The same on an asyncio client."""

    async def run() -> list[bytes]:
        client = aioredis.from_url(redis_url)
        try:
            double = lua.script(client, "double")
            first = await double(keys=[qname], args=[1])
            await client.script_flush()
            return [first, await double(keys=[qname], args=[2])]
        finally:
            await client.aclose()

    assert asyncio.run(run()) == [b"3", b"5"]


def test_queue_scripts_are_the_queues_lua_dir(r: redis.Redis) -> None:
    """`Scripts` and `source` are queues/lua/ through the same loader."""
    scripts = Scripts(r)
    for name in NAMES:
        assert getattr(scripts, name).script == source(name) == QUEUE_LUA.source(name)
    assert "@include" not in source("move_to_finished")
