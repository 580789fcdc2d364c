"""Scripts sent as Redis functions (queues/luafunctions.py, scriptcalls.py):
every script of the four Lua directories becomes a library that loads; a
call through a library answers as its EVALSHA does and starts from the same
per-call state; a Redis that refuses FCALL, a flushed library and a library
that will not load all fall back without losing a call."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis

from dashboard.api import scripts as api_scripts
from dashboard.console import login_throttle
from gpu_workers import gputime
from queues import Queue, codec
from queues import scripts as queue_scripts
from queues.hotpath import _drive_sync, sync_adds
from queues.luafunctions import build
from queues.luaprune import _NOISE as NOISE
from queues.ops import Eval
from queues.scriptcalls import Routes, exchange
from queues.scripts import LuaDir, ScriptSet
from tests.queues.transitions.helpers import claim_keys, worker_opts
from tests.redis_server import RedisServer

DIRS = [queue_scripts.QUEUE_LUA, gputime.LUA, api_scripts.LUA, login_throttle._LUA]


def send(routes: Routes, client: redis.Redis, call: Eval) -> Any:
    """`call`'s reply through `routes`, as the lean paths send it."""
    conn = client.connection_pool.get_connection()
    try:
        [reply] = _drive_sync(conn, exchange(routes, [call]))
    finally:
        client.connection_pool.release(conn)
    return reply


def claim(q: Queue, routes: Routes) -> list[Any]:
    keys = claim_keys(q.keys)
    return list(
        send(
            routes,
            q.client,
            Eval("move_to_active", keys, (q.keys.base, 1, worker_opts(), 1)),
        )
    )


def function_names(client: redis.Redis) -> set[str]:
    names = set()
    for lib in client.function_list():
        pairs = lib if isinstance(lib, dict) else dict(zip(lib[::2], lib[1::2]))
        name = pairs.get("library_name", pairs.get(b"library_name"))
        names.add(name.decode() if isinstance(name, bytes) else name)
    return names


@pytest.mark.parametrize("lua", DIRS, ids=lambda d: d.directory.name)
def test_every_script_with_includes_is_a_library_that_loads(
    lua: LuaDir, r: redis.Redis
) -> None:
    for name in lua.names:
        function = lua.function(name)
        has_includes = '--- @include "' in (lua.directory / f"{name}.lua").read_text()
        assert (function is not None) == has_includes, name
        if function is None:
            continue
        assert function.name.startswith(f"bullpen_{name}_")
        assert function.text.startswith(f"#!lua name={function.name}\n")
        r.execute_command("FUNCTION", "LOAD", "REPLACE", function.text)
        assert function.name in function_names(r)


def test_a_call_through_a_library_answers_as_evalsha_and_starts_afresh(
    q: Queue, r: redis.Redis
) -> None:
    """The same claims through FCALL and EVALSHA; base.lua's per-call meta
    cache starts empty each call: a pause between two calls is seen."""
    functions, scripts = Routes(q.scripts), Routes(q.scripts, functions=False)
    for i in range(4):
        q.add("job", {"i": i})
    before = r.info("commandstats")
    first = claim(q, functions)
    q.pause()
    assert claim(q, functions)[0] == [] and claim(q, scripts)[0] == []
    q.resume()
    second, third = claim(q, functions), claim(q, scripts)
    stats = r.info("commandstats")
    assert (
        stats["cmdstat_fcall"]["calls"]
        - before.get("cmdstat_fcall", {}).get("calls", 0)
        >= 3
    )
    got = [reply[0][0] for reply in (first, second, third)]
    assert got == ["1", "2", "3"]
    fields = [codec.pairs_to_dict(reply[0][2]) for reply in (first, second, third)]
    assert [codec.loads(f["data"])["i"] for f in fields] == [0, 1, 2]
    assert first[1:] == second[1:] == third[1:]


def test_a_flushed_library_is_loaded_again(own_redis: RedisServer, qname: str) -> None:
    client = redis.Redis.from_url(own_redis.url, decode_responses=True)
    with Queue(qname, own_redis.url) as queue:
        queue.add("one")
        assert any(
            n.startswith("bullpen_add_standard_job_") for n in function_names(client)
        )
        client.execute_command("FUNCTION", "FLUSH")
        client.script_flush()
        queue.add("two")
        assert any(
            n.startswith("bullpen_add_standard_job_") for n in function_names(client)
        )
        assert client.llen(f"bull:{qname}:wait") == 2
    client.close()


def test_a_redis_that_refuses_fcall_gets_evalsha(
    own_redis: RedisServer, qname: str
) -> None:
    """An ACL allowing EVALSHA but not FCALL or FUNCTION (Redis 6 answers
    FCALL "unknown command" the same way): every add is stored, by EVALSHA."""
    admin = redis.Redis.from_url(own_redis.url, decode_responses=True)
    user, password = f"u{uuid.uuid4().hex[:8]}", "pw"
    admin.execute_command(
        "ACL",
        "SETUSER",
        user,
        "on",
        f">{password}",
        "~*",
        "&*",
        "+@all",
        "-fcall",
        "-function",
    )
    url = own_redis.url.replace("redis://", f"redis://{user}:{password}@")
    with Queue(qname, url) as queue:
        for i in range(3):
            queue.add("job", {"i": i})
        lean = sync_adds(queue.client)
        assert lean is not None and lean.routes.functions is False
    assert admin.llen(f"bull:{qname}:wait") == 3
    assert admin.info("commandstats")["cmdstat_evalsha"]["calls"] >= 3
    admin.close()


def test_a_refusal_for_the_keys_stands_and_keeps_functions(
    own_redis: RedisServer, qname: str
) -> None:
    """NOPERM for the keys (not for FCALL) is the caller's error, as EVALSHA
    would answer it; the client keeps sending FCALL."""
    admin = redis.Redis.from_url(own_redis.url, decode_responses=True)
    user = f"k{uuid.uuid4().hex[:8]}"
    admin.execute_command(
        "ACL", "SETUSER", user, "on", ">pw", "~elsewhere:*", "&*", "+@all"
    )
    url = own_redis.url.replace("redis://", f"redis://{user}:pw@")
    with Queue(qname, url) as queue:
        with pytest.raises(redis.exceptions.NoPermissionError):
            queue.add("job")
        lean = sync_adds(queue.client)
        assert lean is not None and lean.routes.functions is True
    assert admin.llen(f"bull:{qname}:wait") == 0
    admin.close()


def test_a_library_that_will_not_load_leaves_its_script_on_evalsha(
    tmp_path: Path, r: redis.Redis
) -> None:
    """`...` is fine in a script's chunk but not in a function's body, so
    this library fails to load: the call still runs, by EVALSHA."""
    (tmp_path / "includes").mkdir()
    (tmp_path / "includes" / "base.lua").write_text(
        "local rcall = redis.call\nlocal function twice(x)\n  return 2 * x\nend\n"
    )
    (tmp_path / "odd.lua").write_text(
        '--- @include "base"\nreturn twice(select("#", ...) + tonumber(ARGV[1]))\n'
    )
    lua = LuaDir(tmp_path, ["odd"])
    assert lua.function("odd") is not None
    routes = Routes(ScriptSet(lua, r))
    call = Eval("odd", (), (20,))
    assert send(routes, r, call) == 40
    assert send(routes, r, call) == 40
    assert routes.command(call)[0] == "EVALSHA"


@pytest.mark.parametrize(
    "head",
    [
        'rcall("SET", "x", "1")',  # a statement that is not `local NAME = expr`
        "local T = {\n  1,\n}",  # one spanning lines
        "local a, b = 1, 2",
        "local a = 1; local b = 2",
    ],
)
def test_includes_outside_the_layout_make_no_library(head: str) -> None:
    assert build("x", head, "return 1") is None


def test_top_level_statements_stay_declared_and_run_in_the_call() -> None:
    """Each `local NAME = expr` of the includes stays declared where it was;
    the call sets it: every call, or once for a capitalised constant that
    reads nothing of the call."""
    head = (
        "--[[ a comment\n  local NOT = 1\n]]\nlocal rcall = redis.call  -- note\n"
        "local function f()\n  return rcall\nend\nlocal PIN = string.rep('-', 3)\n"
        "local cache = {}\nlocal FIRST = ARGV[1]"
    )
    function = build("x", head, "return f()")
    assert function is not None
    lines = function.text.split("\n")
    start = lines.index(
        f"redis.register_function('{function.name}', function(KEYS, ARGV)"
    )
    assert lines[1:start] == [
        "local rcall",
        "local function f()",
        "  return rcall",
        "end",
        "local PIN",
        "local cache",
        "local FIRST",
    ]
    assert lines[start + 1 : start + 5] == [
        "rcall = redis.call",
        "if PIN == nil then PIN = string.rep('-', 3) end",
        "cache = {}",
        "FIRST = ARGV[1]",
    ]
    assert lines[-3:] == ["return f()", "end)", ""]


def changes(name: str, code: str) -> list[str]:
    """Where `code` (comments and strings left out) changes `name`."""
    return re.findall(
        rf"(?<![\w.])(?<!local ){name}\s*(?:\[[^\]]*\]|\.\w+)*\s*=(?!=)"
        rf"|table\.(?:insert|remove|sort)\(\s*{name}\b",
        code,
    )


@pytest.mark.parametrize("lua", DIRS, ids=lambda d: d.directory.name)
def test_capitalised_names_are_never_changed(lua: LuaDir) -> None:
    """Libraries keep such constants from call to call (luafunctions.py), so
    no Lua file of the directory assigns one after its declaration, into
    it, or through table.insert/remove/sort."""
    files = [*lua.directory.glob("*.lua"), *lua.directory.glob("includes/*.lua")]
    codes = {path.name: NOISE.sub(" ", path.read_text()) for path in files}
    names = {
        name
        for code in codes.values()
        for name in re.findall(r"^local ([A-Z][A-Z0-9_]*) =", code, re.M)
    }
    for file, code in codes.items():
        for name in names:
            assert changes(name, code) == [], (file, name)
    # What the check catches.
    assert changes("NO_SETTINGS", "local NO_SETTINGS = {}\nNO_SETTINGS[1] = true")
    assert changes("LIMITS", "x = 1\n  LIMITS = {}")
    assert changes("LIMITS", "table.insert(LIMITS, 2)")
    assert not changes("LIMITS", "local LIMITS = {}\nif LIMITS == x then end")


def test_a_call_keeps_its_constants_and_starts_its_caches_afresh(
    r: redis.Redis,
) -> None:
    """In Redis: a constant set on the first call is the same table on the
    next; a per-call cache is new each call."""
    head = "local seen = {}\nlocal SHARED = {}"
    function = build(
        "keep",
        head,
        "local n = #SHARED\nSHARED[n + 1] = 1\n"
        "seen[#seen + 1] = 1\nreturn {#SHARED, #seen}",
    )
    assert function is not None
    r.execute_command("FUNCTION", "LOAD", "REPLACE", function.text)
    assert r.execute_command("FCALL", function.name, 0) == [1, 1]
    assert r.execute_command("FCALL", function.name, 0) == [2, 1]
