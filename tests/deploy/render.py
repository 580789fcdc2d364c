"""Rendering deploy/k8s with `kubectl kustomize` and validating what comes out:
core kinds against the Kubernetes OpenAPI schema of a pinned version
(`kubernetes-validate`, its bundled schemas: no network), CRD kinds by the
required fields and types their CRDs declare (written down below, with the
source of each)."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
K8S_DIR = ROOT / "deploy" / "k8s"
#: The Kubernetes version the manifests are written for (kubernetes-validate
#: uses the newest bundled schema not newer than this; docs/deploy.md says it).
K8S_VERSION = "1.32.0"

Resource = dict[str, Any]


def kustomizations(root: Path = K8S_DIR) -> list[Path]:
    """Every directory under `root` that holds a kustomization.yaml."""
    return sorted(p.parent for p in root.rglob("kustomization.yaml"))


def kubectl() -> str:
    """The kubectl binary; an error that says what to install when there is none."""
    found = shutil.which("kubectl")
    if found is None:
        raise AssertionError(
            "kubectl not found on PATH: the Kubernetes manifests in deploy/k8s "
            "cannot be rendered, so they are NOT validated. Install kubectl "
            "(>= 1.27, which bundles kustomize v5), e.g. the Debian package or "
            "https://kubernetes.io/docs/tasks/tools/"
        )
    return found


def render(directory: Path) -> list[Resource]:
    """`kubectl kustomize <directory>` as a list of resources."""
    done = subprocess.run(
        [kubectl(), "kustomize", str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, f"kubectl kustomize {directory}:\n{done.stderr}"
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def name_of(resource: Resource) -> str:
    """`Kind/name` for messages."""
    return f"{resource['kind']}/{resource['metadata']['name']}"


def kubernetes_validate() -> Any:
    """The kubernetes_validate module; an error that says how to get it."""
    try:
        import kubernetes_validate
    except ModuleNotFoundError:
        raise AssertionError(
            "kubernetes-validate is not installed, so deploy/k8s is NOT validated: "
            "`make test` installs it (requirements-test.txt)"
        ) from None
    return kubernetes_validate


def schema_problems(resource: Resource) -> list[str]:
    """Core kinds: the strict OpenAPI schema (unknown fields are errors too)."""
    validator = kubernetes_validate()
    try:
        validator.validate(resource, K8S_VERSION, strict=True)
    except validator.ValidationError as exc:
        where = ".".join(str(p) for p in exc.absolute_path)
        return [f"{name_of(resource)}: {where}: {exc.message}"]
    return []


# --- CRDs: required fields and types ------------------------------------------------
# Each rule is (path, type, required). A path is dotted; `[]` walks every item of
# a list. Sources:
#   ServiceMonitor, PrometheusRule: prometheus-operator v0.93.0,
#     example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml
#     and ..._prometheusrules.yaml (openAPIV3Schema `required` lists)
#   ScaledObject: KEDA v2.20, config/crd/bases/keda.sh_scaledobjects.yaml; the
#     prometheus trigger's metadata: pkg/scalers/prometheus_scaler.go
#     (prometheusMetadata: serverAddress, query, threshold are not optional)
DURATION = re.compile(r"^(0|(\d+y)?(\d+w)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?)$")
CRD_RULES: dict[tuple[str, str], list[tuple[str, str, bool]]] = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): [
        ("spec", "object", True),
        ("spec.selector", "object", True),
        ("spec.endpoints", "array", True),
        ("spec.endpoints[].port", "string", False),
        ("spec.endpoints[].path", "string", False),
        ("spec.endpoints[].interval", "duration", False),
        ("spec.endpoints[].scrapeTimeout", "duration", False),
        ("spec.endpoints[].authorization.credentials.key", "string", False),
    ],
    ("monitoring.coreos.com/v1", "PrometheusRule"): [
        ("spec", "object", True),
        ("spec.groups[].name", "string", True),
        ("spec.groups[].rules[].expr", "string", True),
        ("spec.groups[].rules[].for", "duration", False),
    ],
    ("keda.sh/v1alpha1", "ScaledObject"): [
        ("spec", "object", True),
        ("spec.scaleTargetRef", "object", True),
        ("spec.scaleTargetRef.name", "string", True),
        ("spec.triggers", "array", True),
        ("spec.triggers[].type", "string", True),
        ("spec.triggers[].metadata", "object", True),
        ("spec.minReplicaCount", "integer", False),
        ("spec.maxReplicaCount", "integer", False),
        ("spec.pollingInterval", "integer", False),
        ("spec.cooldownPeriod", "integer", False),
    ],
}
PROMETHEUS_TRIGGER_REQUIRED = ("serverAddress", "query", "threshold")


def _walk(value: Any, parts: list[str], where: str) -> Iterator[tuple[str, Any]]:
    """(path, value) for each place `parts` reaches; value None when absent."""
    if not parts:
        yield where, value
        return
    head, rest = parts[0], parts[1:]
    many = head.endswith("[]")
    key = head.removesuffix("[]")
    inner = value.get(key) if isinstance(value, dict) else None
    here = f"{where}.{key}" if where else key
    if not many:
        yield from _walk(inner, rest, here)
        return
    for i, item in enumerate(inner if isinstance(inner, list) else []):
        yield from _walk(item, rest, f"{here}[{i}]")


def _type_ok(value: Any, kind: str) -> bool:
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "duration":
        return isinstance(value, str) and bool(DURATION.match(value))
    return isinstance(value, str)


def crd_problems(resource: Resource) -> list[str]:
    """CRD kinds: the rules above; a kind with neither schema nor rules fails."""
    rules = CRD_RULES.get((resource["apiVersion"], resource["kind"]))
    if rules is None:
        return [f"{name_of(resource)}: no schema and no CRD rules for this kind"]
    problems = []
    for path, kind, required in rules:
        for where, value in _walk(resource, path.split("."), ""):
            if value is None:
                if required:
                    problems.append(f"{name_of(resource)}: {where} is required")
            elif not _type_ok(value, kind):
                problems.append(f"{name_of(resource)}: {where} must be a {kind}")
    if resource["kind"] == "ScaledObject":
        for i, trigger in enumerate(resource.get("spec", {}).get("triggers") or []):
            meta = trigger.get("metadata") or {}
            if trigger.get("type") != "prometheus":
                continue
            for key in PROMETHEUS_TRIGGER_REQUIRED:
                if not isinstance(meta.get(key), str):
                    problems.append(
                        f"{name_of(resource)}: spec.triggers[{i}].metadata.{key} "
                        "is required (a string)"
                    )
            try:
                float(meta.get("threshold", ""))
            except ValueError:
                problems.append(
                    f"{name_of(resource)}: spec.triggers[{i}].metadata.threshold "
                    "must be a number"
                )
    return problems


def validity_problems(resources: list[Resource]) -> list[str]:
    """Schema problems of the core kinds and rule problems of the CRD kinds."""
    problems: list[str] = []
    for resource in resources:
        group = resource["apiVersion"].rpartition("/")[0]
        core = "." not in group or group.endswith(".k8s.io")
        problems += schema_problems(resource) if core else crd_problems(resource)
    return problems
