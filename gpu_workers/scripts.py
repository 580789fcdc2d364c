"""The GPU side's Lua scripts (`lua/`), loaded by one `queues.scripts.LuaDir`:
GPU-time accounting (`gputime_add`, `gputime_sum`: gputime.py), a group's
daily GPU-seconds against its quota (`group_usage_add`: quota.py), a model's
fleet-wide stats (`model_stats`: model_upkeep.py) and claim-time placement
(`peek_wait`, `front_of_wait`: placement.py). Each file says its KEYS and ARGV."""

from __future__ import annotations

from pathlib import Path

from queues.scripts import LuaDir

LUA = LuaDir(
    Path(__file__).with_name("lua"),
    (
        "gputime_add",
        "gputime_sum",
        "group_usage_add",
        "model_stats",
        "peek_wait",
        "front_of_wait",
    ),
)
