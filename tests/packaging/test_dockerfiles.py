"""The images' build steps are deploy/docker/install.sh (which
tests/packaging/test_install.py runs for real, as no image can be built
here): every RUN of both Dockerfiles calls it or is trivial, and both run as
a non-root user with a health check and a command."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILES = ["Dockerfile", "Dockerfile.gpu"]
#: RUN commands that install nothing: a user and its home.
TRIVIAL = re.compile(r"^(useradd|mkdir|chown)\b")
INSTALL = "/deploy/docker/install.sh "


def instructions(name: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined."""
    text = (ROOT / "deploy" / "docker" / name).read_text()
    joined = re.sub(r"\\\n", " ", text)
    found = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            found.append((word.upper(), rest.strip()))
    return found


@pytest.mark.parametrize("name", DOCKERFILES)
def test_every_run_calls_install_sh_or_is_trivial(name: str) -> None:
    """Each RUN is install.sh (or useradd/mkdir), and one RUN is install.sh."""
    runs = [rest for word, rest in instructions(name) if word == "RUN"]
    for command in runs:
        for part in re.split(r"&&|;", command):
            part = part.strip()
            assert INSTALL in f"{part} " or TRIVIAL.match(part), (name, part)
    assert sum(INSTALL in f"{c} " for c in runs) == 1, runs


@pytest.mark.parametrize(
    "name, healthcheck, cmd",
    [
        ("Dockerfile", "/healthz", '["bullpen", "runserver"'),
        ("Dockerfile.gpu", "check-alive", '["python", "-m", "gpu_workers"]'),
    ],
)
def test_images_run_as_a_user_with_a_healthcheck_and_a_command(
    name: str, healthcheck: str, cmd: str
) -> None:
    """USER is not root, HEALTHCHECK probes the process, CMD starts it."""
    found = dict(instructions(name))
    assert found["USER"] not in ("root", "0")
    assert healthcheck in found["HEALTHCHECK"]
    assert found["CMD"].startswith(cmd)
    assert found["FROM"]
