"""dashboard.shared.conf: the settings as one typed object, defaults in one
place."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import pytest

from dashboard import settings as dashboard_settings
from dashboard.shared import conf


def test_settings_defaults_are_the_conf_defaults() -> None:
    """Where the environment sets nothing, settings.py's value of each
    BULLPEN_* setting is the DashboardConf default (one place for defaults).
    Read from dashboard/settings.py itself: the tests' settings change some."""
    computed = {"hostname", "access_log"}  # the host's name, a path under the repo
    for field in dataclasses.fields(conf.DashboardConf):
        name = f"BULLPEN_{field.name.upper()}"
        if field.name in computed or name in os.environ:
            continue
        value = getattr(dashboard_settings, name)
        default = getattr(conf.DEFAULTS, field.name)
        assert (tuple(value) if isinstance(default, tuple) else value) == default, name


def test_conf_follows_a_changed_setting(settings: Any) -> None:
    """A setting changed by a test (override_settings) is seen at once; lists
    are held as tuples and the object cannot be changed."""
    settings.BULLPEN_PAGE_SIZE = 7
    settings.BULLPEN_PREFIXES = ["a", "b"]
    current = conf.get()
    assert current.page_size == 7
    assert current.prefixes == ("a", "b")
    with pytest.raises(dataclasses.FrozenInstanceError):
        current.page_size = 8  # type: ignore[misc]
    assert conf.get() is current  # built once until a setting changes
    settings.BULLPEN_PAGE_SIZE = 9
    assert conf.get().page_size == 9


def test_missing_setting_takes_the_default(settings: Any) -> None:
    """A setting that is not there keeps its default."""
    del settings.BULLPEN_SCAN_CAP
    assert conf.get().scan_cap == conf.DEFAULTS.scan_cap
