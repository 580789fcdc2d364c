"""The installed package, as a user gets it: deploy/docker/install.sh run on a
copy of the source tree into a fresh venv under the temporary directory, and
commands run from there with no trace of the checkout (no PYTHONPATH, a cwd
outside it, no DJANGO_* or BULLPEN_* of the test run)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INSTALL_SH = Path("deploy") / "docker" / "install.sh"
#: Installing a venv from the local indexes and the pip cache: well under this.
INSTALL_TIMEOUT_S = 300


def copy_source(dest: Path) -> Path:
    """The checkout's files as `docker build` sees them (tracked, or new and
    not ignored; no links such as .venv) copied to `dest`."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        path = ROOT / name
        if path.is_file() and not path.is_symlink():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, dest / name)
    return dest


def clean_env(venv: Path, **extra: str) -> dict[str, str]:
    """This process's environment without the checkout: no PYTHONPATH, no
    DJANGO_* or BULLPEN_*, another venv's bin first on PATH."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
        and not k.startswith(("DJANGO_", "BULLPEN_"))
    }
    path = [p for p in env.get("PATH", "").split(os.pathsep) if str(ROOT) not in p]
    env["PATH"] = os.pathsep.join([str(venv / "bin"), *path])
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


@dataclass
class Installed:
    """A venv install.sh made, and a working directory outside the checkout."""

    venv: Path
    work: Path
    static_root: Path
    wheel: Path

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of a command of this install."""
        return clean_env(self.venv, BULLPEN_STATIC_ROOT=str(self.static_root), **extra)

    def run(
        self, *cmd: str, timeout: float = 120, **env: str
    ) -> subprocess.CompletedProcess[str]:
        """`cmd` (a script of the venv, or python) run from the work directory."""
        exe = str(self.venv / "bin" / cmd[0])
        return subprocess.run(
            [exe, *cmd[1:]],
            cwd=self.work,
            env=self.env(**env),
            capture_output=True,
            text=True,
            timeout=timeout,
        )


def install(base: Path, extras: str) -> Installed:
    """Run install.sh from a copy of the source into `base`/venv."""
    src = copy_source(base / "src")
    venv, wheels, static = base / "venv", base / "wheels", base / "static"
    done = subprocess.run(
        ["sh", str(src / INSTALL_SH), str(venv), extras],
        cwd=base,
        env=clean_env(
            venv,
            PYTHON=sys.executable,
            BULLPEN_WHEEL_DIR=str(wheels),
            BULLPEN_STATIC_ROOT=str(static),
        ),
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    work = base / "work"
    work.mkdir()
    (wheel,) = wheels.glob("bullpen-*.whl")
    return Installed(venv, work, static, wheel)


def install_base(base: Path, wheel: Path) -> Installed:
    """A venv holding the wheel without extras (a producer's install)."""
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    constraints = base / "constraints.txt"
    pins = (ROOT / "requirements.txt").read_text()
    constraints.write_text(pins.replace("psycopg[binary]", "psycopg"))
    done = subprocess.run(
        [
            str(venv / "bin" / "pip"),
            "install",
            "-q",
            "-c",
            str(constraints),
            str(wheel),
        ],
        env=clean_env(venv),
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    work = base / "work"
    work.mkdir()
    return Installed(venv, work, base / "static", wheel)
