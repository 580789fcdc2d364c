"""deploy/prometheus/rules.yml checked and unit-tested by Debian's promtool
(`make test` installs the `prometheus` package; without it these skip with
the reason)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None,
    reason="promtool not found: install Debian's prometheus package (make test "
    "does, as root) to check the alert rules",
)


def promtool(*args: str, cwd: Path = RULES) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL
    return subprocess.run(
        [PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=60
    )


@needs_promtool
def test_rules_and_scrape_config_are_valid() -> None:
    done = promtool("check", "rules", "rules.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout
    done = promtool("check", "config", "--syntax-only", "prometheus.yml")
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
def test_rules_unit_tests_pass() -> None:
    """rules_test.yml shows every alert firing in its situation, silent
    beside it, and once however many dashboard processes are scraped."""
    done = promtool("test", "rules", "rules_test.yml")
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
def test_the_unit_tests_catch_a_changed_threshold(tmp_path: Path) -> None:
    """A rule whose threshold moved (no-worker alert firing only above 10
    waiting jobs) fails the unit tests: they assert, not just run."""
    for name in ("rules.yml", "rules_test.yml"):
        shutil.copy(RULES / name, tmp_path / name)
    rules = tmp_path / "rules.yml"
    text = rules.read_text()
    assert "bullpen:queue_waiting:max > 0\n" in text
    rules.write_text(
        text.replace(
            "bullpen:queue_waiting:max > 0\n", "bullpen:queue_waiting:max > 10\n"
        )
    )
    done = promtool("test", "rules", "rules_test.yml", cwd=tmp_path)
    assert done.returncode != 0
    assert "BullpenQueueNoWorker" in done.stdout + done.stderr


def test_the_kubernetes_prometheus_rule_carries_the_same_rules() -> None:
    """deploy/k8s's PrometheusRule is rules.yml's groups, not a second set
    drifting apart (regenerate it with the command in its header)."""
    import yaml

    from tests.alerts.prometheusrule import K8S_RULE, prometheus_rule, render

    assert yaml.safe_load(K8S_RULE.read_text()) == prometheus_rule()
    assert K8S_RULE.read_text() == render()
