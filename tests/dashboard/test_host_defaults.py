"""A host project that sets no BULLPEN_* setting (tests/hostproject, which
names only REDIS_URL, here not even that) reads every setting as the
standalone site (dashboard/settings.py) reads it with nothing in the
environment: the pages and the API read one conf, at the table's defaults.

Before the one table, such a host's pages loaded the demo and torch handlers
while its API loaded none (one waiting job, two reasons), and its webhook
dispatcher was named `localhost` on every host."""

from __future__ import annotations

import json
import socket
from typing import Any

from tests.dashboard.helpers import django_process

#: Prints both apps' settings as the process reads them, as JSON: the conf
#: the pages import and the one the API's modules import.
_DUMP = """
import dataclasses, json, django
django.setup()
from dashboard.api import store
from dashboard.api.views import common
from dashboard.shared import discovery
from dashboard.shared import conf
assert store.conf is common.conf is discovery.conf is conf
print(json.dumps(dataclasses.asdict(conf.get()), default=str))
"""


def _read(settings_module: str) -> dict[str, Any]:
    """Both apps' settings in a process of `settings_module` whose
    environment has no BULLPEN_* variable and no REDIS_URL."""
    done = django_process(_DUMP, settings_module)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_a_bare_host_reads_the_standalone_defaults() -> None:
    from dashboard.shared.conf import DEFAULTS

    host = _read("tests.hostproject.settings")
    standalone = _read("dashboard.settings")
    differing = {
        name: (value, standalone[name])
        for name, value in host.items()
        if standalone[name] != value
    }
    assert differing == {}
    expected = json.loads(json.dumps(DEFAULTS.__dict__, default=str))
    assert host == expected
    assert host["handler_modules"] == [
        "gpu_workers.demo_handlers",
        "gpu_workers.torch_handlers",
    ]
    assert host["hostname"] == socket.gethostname()  # the dispatcher's name
    assert host["prefix"] == host["prefixes"][0] == "bull"
