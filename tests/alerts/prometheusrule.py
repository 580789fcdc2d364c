"""The Prometheus Operator's PrometheusRule of deploy/k8s (production overlay)
made from deploy/prometheus/rules.yml, so that both carry the same rules:
`python -m tests.alerts.prometheusrule` prints the file (tests/alerts/test_rules.py
fails while they differ)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "rules.yml"
K8S_RULE = ROOT / "deploy" / "k8s" / "overlays" / "production" / "prometheusrule.yaml"
HEADER = """\
# Bullpen's alert and recording rules for the Prometheus Operator: the groups
# of deploy/prometheus/rules.yml, unchanged. `python -m tests.alerts.prometheusrule`
# prints this file; tests/alerts/test_rules.py fails while the two differ.
"""


class _Dumper(yaml.SafeDumper):
    pass


def _text(dumper: yaml.SafeDumper, value: str) -> Any:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _text)


def prometheus_rule() -> dict[str, Any]:
    """The PrometheusRule object holding rules.yml's groups."""
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "bullpen"},
        "spec": {"groups": groups},
    }


def render() -> str:
    """The file's text: header and the object as YAML."""
    body = yaml.dump(prometheus_rule(), Dumper=_Dumper, sort_keys=False, width=100)
    return HEADER + body


if __name__ == "__main__":
    print(render(), end="")
