"""dashboard.shared.conf: both apps' settings as one typed object, names and
defaults in one table (gpu_workers/settings.py)."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import pytest

from dashboard import settings as dashboard_settings
from dashboard.shared import conf
from gpu_workers.settings import BY_ATTR, BY_NAME, ROWS


def test_settings_defaults_are_the_conf_defaults() -> None:
    """Where the environment sets nothing, settings.py's value of each
    BULLPEN_* setting gives the conf default (one place for defaults).
    Read from dashboard/settings.py itself: the tests' settings change some."""
    for field in dataclasses.fields(conf.Conf):
        name = conf.named(field.name)
        if name in os.environ:
            continue
        value = getattr(dashboard_settings, name)
        built = conf.build({name: value})
        default = getattr(conf.DEFAULTS, field.name)
        assert getattr(built, field.name) == default, name


def test_the_conf_has_a_field_for_every_row_the_apps_read() -> None:
    """Every row of the table that is not the standalone site's own is a
    field of the conf, of its default's type; names are unique."""
    assert [f.name for f in dataclasses.fields(conf.Conf)] == list(
        conf.Conf.__dataclass_fields__
    )
    assert {f.name for f in dataclasses.fields(conf.Conf)} == set(BY_ATTR)
    assert len(BY_NAME) == len(ROWS)
    assert len({row.attr for row in ROWS}) == len(ROWS)


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


def test_computed_defaults(settings: Any) -> None:
    """Without a host name or an API prefix: the machine's name, and the
    first of the key prefixes."""
    import socket

    settings.BULLPEN_HOSTNAME = ""
    settings.BULLPEN_API_PREFIX = ""
    settings.BULLPEN_PREFIXES = ["{x}", "y"]
    assert conf.get().hostname == socket.gethostname()
    assert conf.get().prefix == "{x}"
    assert conf.read("prefix") == "{x}"
    del settings.BULLPEN_API_PREFIX
    assert conf.get().prefix == "{x}"
