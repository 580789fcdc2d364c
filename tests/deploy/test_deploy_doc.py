"""Every shell command of docs/deploy.md is checked here or run elsewhere:
section 4's dashboard block runs as written in tests/packaging; here the
others run where this machine can (redis-server with the doc's flags, psql
on the local PostgreSQL, kubectl's offline verbs, the secret-key one-liner),
and the rest are checked against what they name: Bullpen's commands and
flags exist, paths exist, exported variables are documented, extras exist.
A command none of these knows fails the test: a new doc command must say
how it is checked."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from tests.helpers import serve_logged
from tests.packaging.deploy_doc import Command, commands
from tests.packaging.test_install import PRODUCTION

ROOT = Path(__file__).resolve().parents[2]
DOC = commands()
#: kubectl verbs that need a cluster: their flags are checked against --help.
CLUSTER_VERBS = {"apply", "wait", "rollout", "exec", "delete"}


def run(argv: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        **kw,  # type: ignore[call-overload]
    )


def flags(argv: list[str]) -> list[str]:
    """The --long flags of a command line, without their values."""
    return [a.split("=")[0] for a in argv if a.startswith("--")]


def help_names_flags(help_argv: list[str], argv: list[str]) -> None:
    done = run(help_argv)
    assert done.returncode == 0, (help_argv, done.stderr)
    for flag in flags(argv):
        assert flag in done.stdout, f"{' '.join(argv)}: {flag} is not in its --help"


def _bullpen(c: Command, tmp: Path) -> None:
    """A management command that exists, with flags its --help names."""
    words = [w for w in c.argv[1:] if not w.startswith("-")]
    sub = words[:2] if words[:1] == ["apitoken"] else words[:1]
    env = dict(os.environ, DJANGO_SECRET_KEY="doc-test-" + "k" * 50)
    done = run([sys.executable, "manage.py", *sub, "--help"], env=env)
    assert done.returncode == 0, (c.text, done.stderr)
    for flag in flags(c.argv):
        assert flag in done.stdout, f"{c.text}: {flag} is not in its --help"


def _gpu_workers(c: Command, tmp: Path) -> None:
    assert c.argv[:3] == ["python", "-m", "gpu_workers"], c.text
    help_names_flags([sys.executable, *c.argv[1:4], "--help"], c.argv)


def _redis_server(c: Command, tmp: Path) -> None:
    """The doc's flags start a server that has them (port and dir moved)."""
    password = secrets.token_urlsafe(16)

    def argv(port: int) -> list[str]:
        words = [a.replace("$REDIS_PASSWORD", password) for a in c.argv]
        words[words.index("--port") + 1] = str(port)
        return [*words, "--dir", str(tmp), "--bind", "127.0.0.1"]

    def ours(port: int) -> bool:
        # (Another server that took the port first has no such password.)
        client = redis.Redis(port=port, password=password)
        try:
            return bool(client.ping())
        except redis.ConnectionError:
            return False
        finally:
            client.close()

    proc, port = serve_logged(argv, tmp / "redis.log", answers=ours, timeout=10)
    try:
        client = redis.Redis(port=port, password=password, decode_responses=True)
        config = client.config_get("maxmemory-policy", "appendonly", "maxmemory")
        assert config["maxmemory-policy"] == "noeviction"
        assert config["appendonly"] == "yes"
        assert config["maxmemory"] == str(8 * 2**30)
        client.close()
    finally:
        proc.kill()
        proc.wait()


def _psql(c: Command, tmp: Path) -> None:
    """The SQL runs on this machine's PostgreSQL (names made unique, dropped)."""
    if shutil.which("psql") is None:
        pytest.fail(
            "psql is not installed: the doc's PostgreSQL commands are unchecked"
        )
    suffix = secrets.token_hex(4)
    sql = c.argv[c.argv.index("-c") + 1].replace("bullpen", f"bullpen_doc_{suffix}")
    base = ["psql", "-h", "127.0.0.1", "-U", "postgres", "-v", "ON_ERROR_STOP=1"]
    role = f"bullpen_doc_{suffix}"
    setup = "CREATE ROLE {0} LOGIN" if "DATABASE" in sql else ""
    try:
        if setup:
            assert run([*base, "-c", setup.format(role)]).returncode == 0
        done = run([*base, "-c", sql])
        assert done.returncode == 0, (c.text, done.stderr)
    finally:
        run([*base, "-c", f"DROP DATABASE IF EXISTS {role}"])
        run([*base, "-c", f"DROP ROLE IF EXISTS {role}"])


def _python3(c: Command, tmp: Path) -> None:
    done = run([sys.executable, *c.argv[1:]])
    assert done.returncode == 0 and len(done.stdout.strip()) >= 43, done


def _pip(c: Command, tmp: Path) -> None:
    """`pip install 'bullpen[extras]'`: the extras exist."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (spec,) = [a for a in c.argv[2:] if not a.startswith("-")]
    name, _, extras = spec.partition("[")
    assert name == project["name"]
    for extra in filter(None, extras.rstrip("]").split(",")):
        assert extra in project["optional-dependencies"], (c.text, extra)


def _docker(c: Command, tmp: Path) -> None:
    """`docker build`: its Dockerfile and build-arg extras exist (no engine
    runs here; tests/packaging runs the install script its steps call)."""
    assert c.argv[1] == "build" and c.argv[-1] == ".", c.text
    assert (ROOT / c.argv[c.argv.index("-f") + 1]).is_file(), c.text
    for arg in c.argv:
        if arg.startswith("EXTRAS="):
            _pip(
                Command(
                    c.section, c.text, {}, ["pip", "install", f"bullpen[{arg[7:]}]"]
                ),
                tmp,
            )


def _export(c: Command, tmp: Path) -> None:
    documented = (ROOT / "docs" / "configuration.md").read_text()
    for assignment in c.argv[1:]:
        name = assignment.split("=")[0]
        assert f"`{name}`" in documented, f"{name} is not in docs/configuration.md"


def _kubectl(c: Command, tmp: Path) -> None:
    """Offline verbs run (create as a client-side dry run, kustomize renders);
    cluster verbs have the flags their --help names."""
    if shutil.which("kubectl") is None:
        pytest.fail(
            "kubectl is not installed: the doc's kubectl commands are unchecked"
        )
    argv = list(c.argv)
    verb = next(a for a in argv[1:] if not a.startswith("-") and a != "bullpen")
    for i, a in enumerate(argv):
        if a in ("-k",) or verb == "kustomize" and a.startswith("deploy/"):
            assert (
                ROOT / argv[i + 1 if a == "-k" else i] / "kustomization.yaml"
            ).is_file()
    if verb == "create":
        if "tls" in argv:
            key, crt = tmp / "tls.key", tmp / "tls.crt"
            subprocess.run(
                [
                    "openssl",
                    "req",
                    "-x509",
                    "-newkey",
                    "rsa:2048",
                    "-nodes",
                    "-days",
                    "1",
                ]
                + [
                    "-subj",
                    "/CN=bullpen.example.com",
                    "-keyout",
                    str(key),
                    "-out",
                    str(crt),
                ],
                check=True,
                capture_output=True,
            )
        done = subprocess.run(
            ["bash", "-c", c.text + " --dry-run=client -o yaml"],
            capture_output=True,
            text=True,
            cwd=tmp,
            timeout=60,
        )
        assert done.returncode == 0, (c.text, done.stderr)
        assert "kind:" in done.stdout
    elif verb == "kustomize":
        assert run(argv).returncode == 0, c.text
    else:
        assert verb in CLUSTER_VERBS, f"{c.text}: kubectl {verb} is not classified"
        words = [a for a in argv[1:] if not a.startswith("-") and a != "bullpen"]
        sub = words[:2] if verb == "rollout" else words[:1]
        help_names_flags(["kubectl", *sub, "--help"], argv)


CHECKS: dict[str, Callable[[Command, Path], None]] = {
    "bullpen": _bullpen,
    "python": _gpu_workers,
    "redis-server": _redis_server,
    "psql": _psql,
    "python3": _python3,
    "pip": _pip,
    "docker": _docker,
    "export": _export,
    "kubectl": _kubectl,
}


@pytest.mark.parametrize(
    "command", DOC, ids=[f"{i}:{c.argv[0]}" for i, c in enumerate(DOC)]
)
def test_every_command_of_the_deploy_doc_is_checked(
    command: Command, tmp_path: Path
) -> None:
    check = CHECKS.get(command.argv[0])
    assert check, (
        f"no check knows {command.text!r}: add one to tests/deploy/test_deploy_doc.py"
    )
    _export(
        Command(command.section, command.text, {}, ["export", *command.env]), tmp_path
    )
    check(command, tmp_path)


def test_section_3_names_the_production_variables_the_tests_use() -> None:
    """tests/packaging runs `check --deploy` with PRODUCTION; section 3's
    table names each of them."""
    text = (ROOT / "docs" / "deploy.md").read_text()
    table = text.split("## 3.")[1].split("## 4.")[0]
    for name in PRODUCTION:
        assert f"`{name}`" in table, name
