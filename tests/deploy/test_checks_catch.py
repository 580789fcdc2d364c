"""Each check of tests/deploy fails on a manifest broken for it: a copy of
deploy/k8s with one edit, rendered (overlays/keda holds every resource) and
given to that one check, which must name the problem. (The unbroken
manifests pass every check: test_manifests.py.)"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.deploy import checks
from tests.deploy.render import K8S_DIR, Resource, render, validity_problems

SECRET_REF = """- name: REDIS_URL
              valueFrom:
                secretKeyRef:
                  name: bullpen-secrets
                  key: REDIS_URL"""

Check = Callable[[list[Resource], set[str]], list[str]]


def _validity(resources: list[Resource], exported: set[str]) -> list[str]:
    return validity_problems(resources)


def _env(resources: list[Resource], exported: set[str]) -> list[str]:
    return checks.check_env_documented(resources, checks.documented_variables())


def _only(check: Callable[[list[Resource]], list[str]]) -> Check:
    return lambda resources, exported: check(resources)


# (id, file under deploy/k8s, text, replacement, check, a problem contains)
BREAKAGES: list[tuple[str, str, str, str, Check, str]] = [
    (
        "schema-type",
        "base/dashboard.yaml",
        "replicas: 2",
        "replicas: two",
        _validity,
        "Deployment/bullpen-dashboard: spec.replicas: 'two' is not of type 'integer'",
    ),
    (
        "schema-unknown-field",
        "base/dashboard.yaml",
        "readinessProbe:",
        "readinesProbe:",
        _validity,
        "'readinesProbe' was unexpected",
    ),
    (
        "crd-servicemonitor-selector",
        "overlays/production/servicemonitor.yaml",
        "  selector:\n",
        "  podSelector:\n",
        _validity,
        "ServiceMonitor/bullpen-dashboard: spec.selector is required",
    ),
    (
        "crd-prometheusrule-duration",
        "overlays/production/prometheusrule.yaml",
        "for: 2m",
        "for: two minutes",
        _validity,
        "spec.groups[0].rules[18].for must be a duration",
    ),
    (
        "crd-keda-threshold",
        "overlays/keda/scaledobject.yaml",
        'threshold: "20"',
        'threshold: "lots"',
        _validity,
        "spec.triggers[0].metadata.threshold must be a number",
    ),
    (
        "command-management",
        "base/dispatcher.yaml",
        'args: ["bullpen", "runwebhooks"]',
        'args: ["bullpen", "runwebhook"]',
        _only(checks.check_commands),
        "no command `bullpen runwebhook`",
    ),
    (
        "command-gpu-image-django",
        "base/gpu-worker.yaml",
        'args: ["python", "-m", "gpu_workers"]',
        'args: ["bullpen", "runworkers"]',
        _only(checks.check_commands),
        "the GPU image has no Django",
    ),
    (
        "command-gpu-workers",
        "base/gpu-worker.yaml",
        '"gpu_workers", "drain"',
        '"gpu_workers", "stop"',
        _only(checks.check_commands),
        "preStop: no `python -m gpu_workers stop`",
    ),
    (
        "probe-path",
        "base/dashboard.yaml",
        "path: /readyz",
        "path: /ready",
        _only(checks.check_probes),
        "readinessProbe: the dashboard serves no /ready",
    ),
    (
        "probe-port",
        "base/dashboard.yaml",
        "- name: http\n              containerPort: 8000",
        "- name: web\n              containerPort: 8000",
        _only(checks.check_probes),
        "livenessProbe: the container has no port http",
    ),
    (
        "probe-allowed-hosts",
        "base/dashboard.yaml",
        '"$(DJANGO_ALLOWED_HOSTS),$(POD_IP)"',
        '"$(DJANGO_ALLOWED_HOSTS)"',
        _only(checks.check_probes),
        "DJANGO_ALLOWED_HOSTS does not include $(POD_IP)",
    ),
    (
        "reference-service-port",
        "overlays/production/servicemonitor.yaml",
        "- port: http",
        "- port: metrics",
        _only(checks.check_references),
        "ServiceMonitor/bullpen-dashboard: no Service port metrics",
    ),
    (
        "scrape-every-pod",
        "overlays/production/servicemonitor.yaml",
        "targetLabel: __address__",
        "targetLabel: __scheme__",
        _only(checks.check_scrape_once),
        "scrapes every dashboard pod",
    ),
    (
        "scrape-wrong-namespace",
        "overlays/production/servicemonitor.yaml",
        "replacement: bullpen-dashboard.bullpen.svc:80",
        "replacement: bullpen-dashboard.default.svc:80",
        _only(checks.check_scrape_once),
        "default.svc:80 is not the Service bullpen-dashboard.bullpen",
    ),
    (
        "scrape-host-not-allowed",
        "base/config.yaml",
        ",bullpen-dashboard.bullpen.svc",
        "",
        _only(checks.check_scrape_once),
        "Host bullpen-dashboard.bullpen.svc is not in DJANGO_ALLOWED_HOSTS",
    ),
    (
        "ingress-host",
        "overlays/production/ingress.yaml",
        "- host: bullpen.example.com",
        "- host: queues.example.com",
        _only(checks.check_references),
        "Ingress/bullpen-dashboard: queues.example.com is not in DJANGO_ALLOWED_HOSTS",
    ),
    (
        "reference-scale-target",
        "overlays/keda/scaledobject.yaml",
        "name: bullpen-gpu-worker\n  minReplicaCount",
        "name: bullpen-gpu-workers\n  minReplicaCount",
        _only(checks.check_references),
        "no Deployment bullpen-gpu-workers",
    ),
    (
        "drain-grace",
        "base/gpu-worker.yaml",
        "terminationGracePeriodSeconds: 90",
        "terminationGracePeriodSeconds: 60",
        _only(checks.check_drain),
        "terminationGracePeriodSeconds 60 is not above BULLPEN_DRAIN_TIMEOUT_S 60 + 5",
    ),
    (
        "drain-timeout-from-configmap",
        "base/config.yaml",
        'BULLPEN_DRAIN_TIMEOUT_S: "60"',
        'BULLPEN_DRAIN_TIMEOUT_S: "120"',
        _only(checks.check_drain),
        "terminationGracePeriodSeconds 90 is not above BULLPEN_DRAIN_TIMEOUT_S 120",
    ),
    (
        "gpu-limit",
        "base/gpu-worker.yaml",
        "memory: 32Gi\n              nvidia.com/gpu: 1",
        "memory: 32Gi",
        _only(checks.check_gpu_requests),
        "bullpen-gpu-worker supervisor: no nvidia.com/gpu limit",
    ),
    (
        "metric-keda",
        "overlays/keda/scaledobject.yaml",
        "sum(bullpen_queue_jobs{",
        "sum(bullpen_queue_waiting_jobs{",
        checks.check_metric_names,
        "ScaledObject/bullpen-gpu-worker: /metrics exports no bullpen_queue_waiting",
    ),
    (
        "metric-alert",
        "overlays/production/prometheusrule.yaml",
        "bullpen_redis_up == 0",
        "bullpen_redis_ok == 0",
        checks.check_metric_names,
        "PrometheusRule/bullpen: /metrics exports no bullpen_redis_ok",
    ),
    (
        "env-undocumented",
        "base/config.yaml",
        'BULLPEN_WORKERS: "gpu:3"',
        'BULLPEN_WORKERS: "gpu:3"\n  BULLPEN_GPU_COUNT: "1"',
        _env,
        "supervisor: BULLPEN_GPU_COUNT is not in docs/configuration.md",
    ),
    (
        "secret-inlined",
        "base/dispatcher.yaml",
        SECRET_REF,
        '- name: REDIS_URL\n              value: "redis://redis:6379/0"',
        _only(checks.check_secrets),
        "bullpen-dispatcher dispatcher: REDIS_URL is not a secretKeyRef",
    ),
    (
        "secret-in-configmap",
        "base/config.yaml",
        'BULLPEN_WORKERS: "gpu:3"',
        'BULLPEN_WORKERS: "gpu:3"\n  DATABASE_URL: "postgres://db/bullpen"',
        _only(checks.check_secrets),
        "ConfigMap/bullpen-config: holds DATABASE_URL, which belongs in a Secret",
    ),
]


@pytest.mark.parametrize(
    ("path", "text", "replacement", "check", "expected"),
    [b[1:] for b in BREAKAGES],
    ids=[b[0] for b in BREAKAGES],
)
def test_check_names_the_broken_manifest(
    tmp_path: Path,
    exported_metrics: set[str],
    path: str,
    text: str,
    replacement: str,
    check: Check,
    expected: str,
) -> None:
    """The one edit makes its check report the expected problem."""
    copy = tmp_path / "k8s"
    shutil.copytree(K8S_DIR, copy)
    target = copy / path
    original = target.read_text()
    assert original.count(text) == 1, f"{path} no longer holds {text!r} once"
    target.write_text(original.replace(text, replacement))
    problems = check(render(copy / "overlays" / "keda"), exported_metrics)
    assert any(expected in p for p in problems), problems
