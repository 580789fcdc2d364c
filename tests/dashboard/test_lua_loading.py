"""Every Lua script of the three packages is loaded by the one loader
(queues.scripts.LuaDir), and the scripts outside queues/lua/ (the API's, the
login throttle's, GPU-time accounting's) recover after a SCRIPT FLUSH."""

from __future__ import annotations

import time
from pathlib import Path

import redis

from dashboard.api import ratelimit
from dashboard.api import scripts as api_scripts
from dashboard.console import login_throttle
from gpu_workers import gputime
from gpu_workers.keys import BullpenKeys
from queues import scripts as queue_scripts

ROOT = Path(__file__).resolve().parents[2]


def test_every_lua_file_is_named_by_a_lua_dir() -> None:
    """The .lua files (not includes) of queues, gpu_workers and dashboard are
    exactly the scripts of the four LuaDirs; none is read another way."""
    dirs = [
        queue_scripts.QUEUE_LUA,
        gputime.LUA,
        api_scripts.LUA,
        login_throttle._LUA,
    ]
    loaded = {d.directory.resolve() / f"{n}.lua" for d in dirs for n in d.names}
    on_disk = {
        p.resolve()
        for package in ("queues", "gpu_workers", "dashboard")
        for p in (ROOT / package).rglob("*.lua")
        if "includes" not in p.parts
    }
    assert loaded == on_disk
    assert gputime.LUA.directory == ROOT / "gpu_workers" / "lua"


def test_api_and_login_scripts_recover_after_script_flush(
    r: redis.Redis, qname: str
) -> None:
    """The rate limit and the login reserve run again after SCRIPT FLUSH."""
    key = f"{qname}:rate"
    assert ratelimit.take(r, key, 10).remaining == 9
    r.script_flush()
    assert ratelimit.take(r, key, 10).remaining == 8
    reserve = login_throttle._LUA.script(r, "reserve_login_attempt")
    assert reserve(keys=[f"{qname}:login"], args=[3, 60])[:2] == [1, 1]
    r.script_flush()
    assert reserve(keys=[f"{qname}:login"], args=[3, 60])[:2] == [1, 2]


def test_gputime_sum_recovers_after_script_flush(r: redis.Redis, qname: str) -> None:
    """GPU-time sums (gpu_workers/lua/gputime_sum.lua) after SCRIPT FLUSH."""
    keys = BullpenKeys(qname)
    start = int(time.time() // 3600) * 3600
    stamp = gputime.bucket_stamp(gputime.HOUR, start)
    r.hset(keys.gputime(gputime.HOUR, stamp, "queue"), "s|bull:a", "2.5")
    first = gputime.read_summed(r, keys, gputime.HOUR, [start], "queue")
    r.script_flush()
    again = gputime.read_summed(r, keys, gputime.HOUR, [start], "queue")
    assert first == again
    assert again[1]["bull:a"].gpu_seconds == 2.5
