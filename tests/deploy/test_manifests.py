"""deploy/k8s renders with `kubectl kustomize` (base and every overlay), every
resource is valid for Kubernetes K8S_VERSION (core kinds by its OpenAPI
schema, CRD kinds by their CRDs' required fields), and the semantic checks of
tests/deploy/checks.py find nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.deploy.checks import all_problems
from tests.deploy.render import (
    K8S_DIR,
    K8S_VERSION,
    kubernetes_validate,
    kustomizations,
    render,
    validity_problems,
)

KUSTOMIZATIONS = kustomizations()
IDS = [str(p.relative_to(K8S_DIR)) for p in KUSTOMIZATIONS]


def test_the_base_and_overlays_are_there() -> None:
    """The layout docs/deploy.md describes."""
    assert IDS == ["base", "overlays/keda", "overlays/production"]


def test_the_pinned_schema_is_bundled() -> None:
    """kubernetes-validate carries the schema of K8S_VERSION itself (no
    older one stands in for it, nothing is downloaded)."""
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
    assert (
        kubernetes_validate().validate(config_map, K8S_VERSION, strict=True)
        == (K8S_VERSION.rpartition(".")[0])
    )


@pytest.mark.parametrize("directory", KUSTOMIZATIONS, ids=IDS)
def test_every_resource_is_valid(directory: Path) -> None:
    """No schema or CRD-rule problem in any resource."""
    resources = render(directory)
    assert resources
    assert validity_problems(resources) == []


@pytest.mark.parametrize("directory", KUSTOMIZATIONS, ids=IDS)
def test_semantic_checks_pass(directory: Path, exported_metrics: set[str]) -> None:
    """Commands, probes, references, drain timing, GPU limits, metric names,
    documented variables and secrets all hold."""
    assert all_problems(render(directory), exported_metrics) == []


def test_what_each_overlay_adds() -> None:
    """production: a namespace, no example Secret (the real one is made out of
    band), a ServiceMonitor and alerts; keda: the ScaledObject on top; every
    resource of an overlay in the one namespace."""
    base = {(r["kind"], r["metadata"]["name"]) for r in render(K8S_DIR / "base")}
    assert ("Secret", "bullpen-secrets") in base
    production = render(K8S_DIR / "overlays" / "production")
    kinds = {r["kind"] for r in production}
    assert "Secret" not in kinds
    assert {"ServiceMonitor", "PrometheusRule", "Deployment"} <= kinds
    keda = render(K8S_DIR / "overlays" / "keda")
    assert {r["kind"] for r in keda} == kinds | {"ScaledObject"}
    for resource in production + keda:
        assert resource["metadata"].get("namespace") == "bullpen", resource
