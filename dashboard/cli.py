"""`bullpen`: Django's management commands on the dashboard's settings
(`bullpen migrate`, `bullpen check --deploy`, `bullpen runworkers`,
`bullpen apitoken`...), and `bullpen runserver`, which serves the ASGI app
(pages, API, live sockets) on daphne as `make run` does: no autoreload, the
access log redacted (dashboard.serve).

DJANGO_SETTINGS_MODULE defaults to dashboard.settings.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from collections.abc import Sequence

SETTINGS_MODULE = "dashboard.settings"
#: What `bullpen` says where only the queue core is installed.
MISSING_DJANGO = (
    "bullpen: the dashboard is not installed here: pip install 'bullpen[dashboard]'"
)


def _addrport(text: str) -> tuple[str, str]:
    """(host, port) of `8000`, `0.0.0.0:8000` or `[::1]:8000` (Django's
    runserver forms); host '' when only the port is given."""
    if text.isdigit():
        return "", text
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not PORT or HOST:PORT")
    return host, port


def runserver(argv: Sequence[str]) -> None:
    """`bullpen runserver [HOST:PORT] [--host H] [--port P] [--access-log F]`:
    daphne on the dashboard; defaults from the settings (host, port, access
    log, listen backlog: dashboard.shared.conf)."""
    import django

    django.setup()
    from dashboard import serve
    from dashboard.run import access_log_path, daphne_args
    from dashboard.shared import conf

    c = conf.get()
    parser = argparse.ArgumentParser(
        prog="bullpen runserver",
        description="Serve the dashboard, API and live sockets on daphne.",
    )
    parser.add_argument(
        "addrport", nargs="?", type=_addrport, help="PORT or HOST:PORT (Django's form)"
    )
    parser.add_argument("--host", help=f"address to listen on (default: {c.host})")
    parser.add_argument("--port", help=f"port to listen on (default: {c.port})")
    parser.add_argument(
        "--access-log",
        metavar="FILE",
        help="request lines, secrets redacted ('-': standard output; "
        f"default: {access_log_path(c) or '-'})",
    )
    parser.add_argument(
        "--noreload", action="store_true", help="accepted as Django's; never reloads"
    )
    args = parser.parse_args(argv)
    host, port = args.addrport or ("", "")
    host = args.host or host or c.host
    port = args.port or port or str(c.port)
    log = access_log_path(c, args.access_log)  # None: daphne's, standard output
    if log is not None:
        os.makedirs(os.path.dirname(os.path.abspath(log)), exist_ok=True)
    # daphne_args names the module to run (`-m dashboard.serve`); here it runs
    # in this process.
    serve.main(daphne_args(host, port, log, c.listen_backlog)[2:])


def main(argv: Sequence[str] | None = None) -> int:
    """Run `bullpen COMMAND ...` (`argv`: the whole command line, program first)."""
    argv = list(sys.argv if argv is None else argv)
    if importlib.util.find_spec("django") is None:
        print(MISSING_DJANGO, file=sys.stderr)
        return 2
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", SETTINGS_MODULE)
    if argv[1:2] == ["runserver"]:
        runserver(argv[2:])
        return 0
    from django.core.management import execute_from_command_line

    execute_from_command_line(argv)
    return 0
