"""Redis answers a long-running process can wait out, and waiting them out.

A worker (or any loop that lives as long as its process) must never die of
an answer Redis may clear by itself: it cannot be reached or times out, it
is at `maxmemory` (OOM), cannot persist (MISCONF), is a read-only replica
(READONLY, e.g. after a failover), is loading its data set (LOADING), runs
another client's long script (BUSY), or a cluster is re-sharding or has no
master (TRYAGAIN, CLUSTERDOWN, MASTERDOWN, NOREPLICAS), or a blocked
command was released by a failover (UNBLOCKED). `Outage` backs off
through such errors with capped, jittered delays and logs once when an
outage starts and once when it ends, never once per retry.
"""

from __future__ import annotations

import logging
import random
import time

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from . import defaults
from .exceptions import RedisUnavailable

#: Error codes of server refusals that end without anyone's help.
REFUSED_FOR_NOW = frozenset(
    {
        "OOM",
        "MISCONF",
        "READONLY",
        "LOADING",
        "BUSY",
        "TRYAGAIN",
        "CLUSTERDOWN",
        "MASTERDOWN",
        "NOREPLICAS",
        "UNBLOCKED",  # a blocked command, when its server turns replica
    }
)
BACKOFF_BASE_S = 0.1
#: What each refusal means for whoever sent the command.
_MEANING = {
    "OOM": "Redis is out of memory (maxmemory reached, eviction policy "
    "noeviction); free memory or raise maxmemory",
    "MISCONF": "Redis refuses writes because it cannot save its data (MISCONF)",
    "READONLY": "Redis is a read-only replica (a failover may be under way)",
    "LOADING": "Redis is loading its data set",
    "BUSY": "Redis is busy running another client's script",
}


def refusal_code(exc: BaseException) -> str | None:
    """The error code of a Redis refusal that may clear by itself, else None."""
    if not isinstance(exc, ResponseError):
        return None
    # redis-py strips the code from the message of the errors it has a class
    # for (OOM, READONLY, LOADING...) and keeps it in `status_code`.
    code = getattr(exc, "status_code", None) or str(exc).split(" ", 1)[0]
    return code if code in REFUSED_FOR_NOW else None


def recoverable(exc: BaseException) -> bool:
    """Whether waiting may be all it takes: Redis is unreachable, times out,
    or refuses for a reason it can clear by itself (see REFUSED_FOR_NOW)."""
    if isinstance(exc, (RedisConnectionError, RedisTimeoutError, OSError)):
        return True
    return refusal_code(exc) is not None


def raise_if_unavailable(exc: ResponseError) -> None:
    """Raise a RedisUnavailable that says what the refusal means when Redis
    refused for a while (for producers: nothing was written)."""
    code = refusal_code(exc)
    if code is None or isinstance(exc, RedisUnavailable):
        return
    raise RedisUnavailable(
        f"{refusal_meaning(code)}: the command was refused and nothing was written; "
        f"retry later ({describe(exc)})",
        code,
    ) from exc


def refusal_meaning(code: str) -> str:
    """What a refusal code (see REFUSED_FOR_NOW) means, in words."""
    return _MEANING.get(code, f"the Redis cluster is not available ({code})")


def describe(exc: BaseException) -> str:
    """One line naming the error: its code (or class) and message."""
    code = refusal_code(exc)
    text = " ".join(str(exc).split())
    if code and not text.startswith(code):
        text = f"{code} {text}"
    return text or type(exc).__name__


def backoff_s(failures: int, cap_s: float = defaults.RECONNECT_DELAY_MAX_S) -> float:
    """The wait after `failures` failures in a row: doubling from 0.1 s up to
    `cap_s`, each drawn from its upper half so that many processes that lost
    Redis together do not all come back in the same instant."""
    ceiling = min(BACKOFF_BASE_S * 2 ** min(max(failures, 1) - 1, 16), cap_s)
    return random.uniform(ceiling / 2, ceiling)


class Outage:
    """The state of one process's (or loop's) view of Redis: logs the start
    and the end of an outage, and counts failures in a row for backoff."""

    def __init__(self, who: str, logger: logging.Logger) -> None:
        self.who = who
        self.log = logger
        self.failures = 0
        self._since = 0.0

    @property
    def ongoing(self) -> bool:
        """Whether the last attempt failed."""
        return self.failures > 0

    def failed(self, exc: BaseException) -> float:
        """Record a failure; the delay before the next attempt. Logs only the
        first failure of an outage."""
        if not self.failures:
            self._since = time.monotonic()
            self.log.warning(
                "%s: Redis unavailable (%s); retrying with backoff until it answers",
                self.who,
                describe(exc),
            )
        self.failures += 1
        return backoff_s(self.failures)

    def succeeded(self) -> None:
        """Record an answer; logs the end of an outage, if one was going on."""
        if self.failures:
            self.log.warning(
                "%s: Redis answers again after %.1f s (%d failed attempts)",
                self.who,
                time.monotonic() - self._since,
                self.failures,
            )
            self.failures = 0
