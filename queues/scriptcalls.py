"""How the lean paths (hotpath.py) send a script: FCALL of its function
library where Redis has functions (7.0+; luafunctions.py), else EVALSHA,
and what a reply saying the call never ran asks for first.

Such a reply is one of: NOSCRIPT (the script is not in Redis's cache: after
a restart or SCRIPT FLUSH), "Function not found" (the library is not loaded:
a first call, a restart without persistence, FUNCTION FLUSH), or, for FCALL,
an unknown command (Redis 6) or NOPERM for the command FCALL or FUNCTION
itself (an ACL that allows EVALSHA but not them): then this path goes back
to EVALSHA for good (a NOPERM for the keys stands: EVALSHA would meet it
too). A library that will not load leaves its script on EVALSHA too. Each
of these refusals comes before the script runs, so the call is sent again;
nothing else ever is.

`exchange` is written without I/O: it yields the commands to pipeline and
is sent their replies (error replies as values), so the sync and asyncio
paths drive the same steps.
"""

from __future__ import annotations

import logging
from collections.abc import Generator
from typing import Any

from redis.exceptions import NoPermissionError, NoScriptError, ResponseError

from .ops import Eval
from .scripts import ScriptSet

log = logging.getLogger(__name__)

#: Commands to pipeline, their replies, and the calls' replies at the end.
Steps = Generator[list[tuple[Any, ...]], list[Any], list[Any]]


class Routes:
    """The command each call of a `ScriptSet` goes out as, on one Redis."""

    def __init__(self, scripts: ScriptSet, functions: bool = True) -> None:
        self.scripts = scripts
        #: Whether FCALL is used (False once Redis said it has no functions).
        self.functions = functions
        #: Scripts whose library would not load: EVALSHA for them.
        self._unloadable: set[str] = set()

    def command(self, call: Eval) -> tuple[Any, ...]:
        """What `call` goes out as."""
        if self.functions and call.name not in self._unloadable:
            function = self.scripts.function(call.name)
            if function is not None:
                return ("FCALL", function.name, len(call.keys), *call.keys, *call.args)
        script = getattr(self.scripts, call.name)
        return ("EVALSHA", script.sha, len(call.keys), *call.keys, *call.args)

    def fix(
        self, name: str, sent: tuple[Any, ...], reply: Any
    ) -> tuple[Any, ...] | None:
        """For a reply saying `sent` (a call of script `name`) never ran: the
        command to send first (a load; () when none is needed), else None
        (the reply stands)."""
        if not isinstance(reply, ResponseError):
            return None
        if isinstance(reply, NoScriptError):
            return ("SCRIPT", "LOAD", getattr(self.scripts, name).script)
        if sent[0] != "FCALL":
            return None
        text = str(reply)
        function = self.scripts.function(name)
        if text.startswith("Function not found") and function is not None:
            return ("FUNCTION", "LOAD", function.text)
        refused = isinstance(reply, NoPermissionError) and (
            "'fcall'" in text.lower() or "'function" in text.lower()
        )
        if text.startswith("unknown command") or refused:
            if self.functions:
                log.info("Redis runs no functions here (%s): using EVALSHA", text)
            self.functions = False
            return ()
        return None

    def loaded(self, name: str, load: tuple[Any, ...], reply: Any) -> None:
        """Note the reply to `load` for script `name`: a library that would
        not load sends its script as EVALSHA from now (one loaded meanwhile
        by another client says "already exists": fine)."""
        if load[0] != "FUNCTION" or not isinstance(reply, ResponseError):
            return
        if "already exists" not in str(reply):
            log.warning("function library of %s not loaded: %s", name, reply)
            self._unloadable.add(name)


def exchange(routes: Routes, calls: list[Eval]) -> Steps:
    """The steps of sending `calls`: their replies at the end."""
    sent = [routes.command(c) for c in calls]
    replies = yield sent
    # At most: a function load, then (no functions after all) a script load.
    for _ in range(3):
        fixes = [routes.fix(c.name, s, r) for c, s, r in zip(calls, sent, replies)]
        again = [i for i, fix in enumerate(fixes) if fix is not None]
        if not again:
            break
        # One load per script, whatever its calls in the batch.
        loads: dict[str, tuple[Any, ...]] = {}
        for i in again:
            if fix := fixes[i]:
                loads[calls[i].name] = fix
        if loads:
            for (name, load), reply in zip(loads.items(), (yield list(loads.values()))):
                routes.loaded(name, load, reply)
        for i in again:
            sent[i] = routes.command(calls[i])
        for i, reply in zip(again, (yield [sent[i] for i in again])):
            replies[i] = reply
    return replies
