"""`python -m queues functions [--prune]` (queues/functionlibs.py): Bullpen's
function libraries in a Redis, current or left by another version, and
deleting the old ones, on a Redis of the test's own (libraries are
server-wide: a shared server's would be other tests')."""

from __future__ import annotations

import json

import redis

from queues import Queue, functionlibs
from tests.queues.test_cli import assert_error, cli, ok
from tests.queues.test_luafunctions import function_names as names
from tests.redis_server import RedisServer

#: A library as an older Bullpen made it (its script's text hashed otherwise).
OLD = "bullpen_add_standard_job_0123456789abcdef"
#: Someone else's library, never touched.
FOREIGN = "inventory_helpers"


def library(name: str) -> str:
    return (
        f"#!lua name={name}\n"
        f"redis.register_function('{name}', function(keys, args) return 1 end)\n"
    )


def test_lists_and_prunes_only_old_bullpen_libraries(
    own_redis: RedisServer, qname: str
) -> None:
    client = redis.Redis.from_url(own_redis.url, decode_responses=True)
    with Queue(qname, own_redis.url) as queue:
        queue.add("before")  # an add goes as FCALL: its library loads
        for name in (OLD, FOREIGN):
            client.execute_command("FUNCTION", "LOAD", library(name))
        current = {n for n in names(client) if n.startswith("bullpen_")} - {OLD}
        assert current and current <= functionlibs.current_names()

        listed = json.loads(ok(cli(own_redis.url, "functions", "--json")))
        assert {(r["name"], r["current"]) for r in listed["libraries"]} == {
            (OLD, False),
            *((n, True) for n in current),
        }
        assert listed["deleted"] == []
        table = ok(cli(own_redis.url, "functions")).splitlines()
        assert f"{OLD}  old" in table
        assert (
            table[-1] == f"{len(current) + 1} libraries: {len(current)} current, 1 old"
        )

        pruned = ok(cli(own_redis.url, "functions", "--prune")).splitlines()
        assert f"{OLD}  deleted" in pruned and pruned[-1].endswith(", 1 deleted")
        assert names(client) == current | {FOREIGN}
        # Nothing old left: a second prune deletes nothing.
        assert functionlibs.prune(client) == []

        queue.add("after")  # through the current library, kept
        assert client.llen(f"bull:{qname}:wait") == 2
    client.close()


def test_a_user_without_functions_gets_a_clear_error(redis_url: str) -> None:
    """An ACL that refuses FUNCTION: one `error:` line saying so (Redis 6,
    which has no FUNCTION, gets one of its own; there is no Redis 6 here)."""
    admin = redis.Redis.from_url(redis_url, decode_responses=True)
    user = "nofunctions-" + redis_url.rsplit("/", 1)[-1]
    admin.acl_setuser(
        user,
        enabled=True,
        passwords=["+pw"],
        keys=["*"],
        commands=["+@all", "-function"],
    )
    try:
        url = redis_url.replace("redis://", f"redis://{user}:pw@", 1)
        assert_error(cli(url, "functions"), "may not run FUNCTION", "EVALSHA")
    finally:
        admin.acl_deluser(user)
        admin.close()
