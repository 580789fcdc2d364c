"""Which group a job enqueued over the API belongs to (docs/groups.md): the
token's group (its explicit one, else one derived from its name, the tenant),
or with *may set group* a sub-customer `<token group>/<given>`."""

from __future__ import annotations

import re
from typing import Protocol

from queues.names import GROUP_ID_PATTERN, GROUP_ID_RULE, is_group_id

from .exceptions import BadRequest

__all__ = ["GROUP_ID_PATTERN", "GROUP_ID_RULE", "is_group_id"]

#: The longest group id (docs/groups.md; `queues.names.GROUP_ID_PATTERN`).
GROUP_ID_MAX_CHARS = 100
#: What a token name's characters become when they cannot be in a group id;
#: `/` too, so a derived group never looks like a sub-customer of another.
_NOT_IN_DERIVED = re.compile(r"[^A-Za-z0-9_.@+-]")


class GroupedToken(Protocol):
    """What of an API token decides its jobs' group (`models.ApiToken`)."""

    group_jobs: bool
    may_set_group: bool

    @property
    def group_id(self) -> str:
        """The token's group."""
        ...


def derived_group(name: str) -> str:
    """A token name as a group id: every character a group id cannot hold
    (and `/`) becomes `-`, cut to 100 characters; an empty name is `-`."""
    return _NOT_IN_DERIVED.sub("-", name)[:GROUP_ID_MAX_CHARS] or "-"


def check_group_id(value: str, field: str = "group") -> str:
    """A group id from a client, or BadRequest `invalid_group`."""
    if not is_group_id(value):
        raise BadRequest(
            "invalid_group",
            f"{field}: group ids are {GROUP_ID_RULE}",
            {"field": field},
        )
    return value


def job_group(token: GroupedToken | None, given: str | None) -> str | None:
    """The group of a job this token enqueues, with the request's
    `options.group` (None: not sent); None: the job has no group."""
    if token is None:
        if given is not None:
            raise BadRequest("group_not_allowed", "only a token may set options.group")
        return None
    if given is not None:
        if not (token.group_jobs and token.may_set_group):
            raise BadRequest(
                "group_not_allowed",
                "options.group: this token may not set a group per job "
                "(its jobs take the token's group)",
                {"field": "options.group"},
            )
        check_group_id(given, "options.group")
        full = f"{token.group_id}/{given}"
        if len(full) > GROUP_ID_MAX_CHARS:
            raise BadRequest(
                "invalid_group",
                f"options.group: the job's group {token.group_id}/... would be "
                f"over {GROUP_ID_MAX_CHARS} characters",
                {"field": "options.group"},
            )
        return full
    return token.group_id if token.group_jobs else None
