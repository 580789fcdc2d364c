"""`python -m dashboard.serve <daphne arguments>`: daphne whose access log
hides secrets in query strings (job tickets, `?ticket=`), which a log reader
could otherwise replay to read a job."""

from __future__ import annotations

import re
import sys
from typing import Any

from daphne import cli
from daphne.access import AccessLogGenerator

#: Query parameters whose values never reach the access log.
SECRET_PARAMS = ("ticket", "token", "access_token")
_SECRET = re.compile(r"([?&](?:" + "|".join(SECRET_PARAMS) + r")=)[^&\s]*", re.I)


def redact_query(text: str) -> str:
    """`text` with the value of every secret query parameter replaced by ***."""
    return _SECRET.sub(r"\1***", text)


class RedactingAccessLog(AccessLogGenerator):  # type: ignore[misc]
    """daphne's NCSA-style access log, secrets in query strings redacted."""

    def write_entry(self, host: Any, date: Any, request: str, **kw: Any) -> None:
        """One line, as daphne writes it, with `request` redacted."""
        super().write_entry(host, date, redact_query(request), **kw)


def main(argv: list[str] | None = None) -> None:
    """Run daphne's command line (`argv`, else this process's arguments)
    with the redacting access log."""
    # daphne's CLI builds its access log from this module-level name; there is
    # no option to pass a class.
    cli.AccessLogGenerator = RedactingAccessLog
    cli.CommandLineInterface().run(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
