"""Semantic checks of rendered manifests: what a schema cannot see. Each
takes the resources of one rendering and returns its problems (empty: fine);
tests/deploy/test_checks_catch.py shows each one failing on a broken copy."""

from __future__ import annotations

import functools
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

from django.core.management import get_commands
from django.urls import Resolver404, resolve

from gpu_workers.defaults import DRAIN_KILL_GRACE_S, DRAIN_TIMEOUT_S
from tests.deploy.render import ROOT, Resource, name_of

WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet", "Job")
#: Settings that must come from a Secret, never a literal or a ConfigMap.
SECRET_SETTINGS = frozenset(
    {"DJANGO_SECRET_KEY", "REDIS_URL", "DATABASE_URL", "BULLPEN_METRICS_TOKEN"}
)
GPU_RESOURCE = "nvidia.com/gpu"
METRIC = re.compile(r"\bbullpen_[a-z0-9_]+\b")
REFERENCE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def pods(resources: list[Resource]) -> Iterator[tuple[Resource, dict[str, Any]]]:
    """(workload, pod spec) for every workload."""
    for r in resources:
        if r["kind"] in WORKLOADS:
            yield r, r["spec"]["template"]["spec"]


def containers(
    resources: list[Resource],
) -> Iterator[tuple[Resource, dict[str, Any], dict[str, Any]]]:
    """(workload, pod spec, container) for every container, init ones too."""
    for r, spec in pods(resources):
        for c in spec.get("initContainers", []) + spec["containers"]:
            yield r, spec, c


def _find(resources: list[Resource], kind: str, name: str) -> Resource | None:
    for r in resources:
        if r["kind"] == kind and r["metadata"]["name"] == name:
            return r
    return None


def _literal(found: dict[str, Any], name: str, otherwise: str) -> str:
    """A literal earlier value; a valueFrom stays `$(NAME)` (known at run time)."""
    value = found.get(name)
    return value if isinstance(value, str) else otherwise


def environment(resources: list[Resource], c: dict[str, Any]) -> dict[str, Any]:
    """A container's variables as Kubernetes builds them: envFrom first, then env
    (a literal, with $(NAME) expanded from what came before, or the valueFrom)."""
    found: dict[str, Any] = {}
    for source in c.get("envFrom", []):
        ref = source.get("configMapRef")
        cm = ref and _find(resources, "ConfigMap", ref["name"])
        if cm:
            found.update(cm.get("data", {}))
    for var in c.get("env", []):
        if "value" in var:
            found[var["name"]] = REFERENCE.sub(
                lambda m: _literal(found, m.group(1), m.group(0)), var["value"]
            )
        else:
            found[var["name"]] = var.get("valueFrom")
    return found


def argvs(c: dict[str, Any]) -> Iterator[tuple[str, list[str]]]:
    """(what, argv) for the container's command and its exec hooks and probes."""
    yield "command", list(c.get("command", [])) + list(c.get("args", []))
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        if "exec" in c.get(probe, {}):
            yield probe, c[probe]["exec"]["command"]
    for hook in ("postStart", "preStop"):
        action = c.get("lifecycle", {}).get(hook, {})
        if "exec" in action:
            yield hook, action["exec"]["command"]


def is_supervisor(c: dict[str, Any]) -> bool:
    """Runs the GPU worker supervisor."""
    argv = list(c.get("command", [])) + list(c.get("args", []))
    return argv[:2] == ["bullpen", "runworkers"] or (
        argv[:3] == ["python", "-m", "gpu_workers"] and len(argv) == 3
    )


@functools.cache
def gpu_workers_subcommand(name: str) -> bool:
    """`python -m gpu_workers <name> --help` is that subcommand's own help."""
    done = subprocess.run(
        [sys.executable, "-m", "gpu_workers", name, "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    return f"usage: python -m gpu_workers {name}" in done.stdout


def check_commands(resources: list[Resource]) -> list[str]:
    """Every command a container, probe or hook runs is a Bullpen command that
    exists: a management command after `bullpen` (not in the GPU image, which
    has no Django), a subcommand (or none) after `python -m gpu_workers`."""
    problems = []
    commands = get_commands()
    for r, _, c in containers(resources):
        for what, argv in argvs(c):
            where = f"{name_of(r)} {c['name']} {what}"
            if argv[:1] == ["bullpen"] and "bullpen-gpu" in str(c.get("image")):
                problems.append(
                    f"{where}: the GPU image has no Django (extra `gpu` only), "
                    "so no `bullpen` command: use `python -m gpu_workers`"
                )
            elif argv[:1] == ["bullpen"]:
                if len(argv) < 2 or argv[1] not in commands:
                    problems.append(f"{where}: no command `{' '.join(argv[:2])}`")
            elif argv[:3] == ["python", "-m", "gpu_workers"]:
                sub = argv[3:4]
                if sub and not sub[0].startswith("-"):
                    if not gpu_workers_subcommand(sub[0]):
                        problems.append(f"{where}: no `python -m gpu_workers {sub[0]}`")
            elif argv:
                problems.append(f"{where}: runs {argv[0]!r}, not a Bullpen command")
    return problems


def check_probes(resources: list[Resource]) -> list[str]:
    """HTTP probes name a path the dashboard serves and a port the container
    exposes, and their Host (the pod's IP) is in DJANGO_ALLOWED_HOSTS."""
    problems = []
    for r, _, c in containers(resources):
        ports = c.get("ports", [])
        names = {p.get("name") for p in ports}
        numbers = {p["containerPort"] for p in ports}
        env = environment(resources, c)
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            http = c.get(probe, {}).get("httpGet")
            if not http:
                continue
            where = f"{name_of(r)} {c['name']} {probe}"
            try:
                resolve(http["path"])
            except Resolver404:
                problems.append(f"{where}: the dashboard serves no {http['path']}")
            if http["port"] not in names | numbers:
                problems.append(f"{where}: the container has no port {http['port']}")
            hosts = str(env.get("DJANGO_ALLOWED_HOSTS", "")).split(",")
            pod_ip = env.get("POD_IP")
            given = {h["name"].lower() for h in http.get("httpHeaders", [])}
            if "host" not in given and not (
                "$(POD_IP)" in hosts
                and pod_ip == {"fieldRef": {"fieldPath": "status.podIP"}}
            ):
                problems.append(
                    f"{where}: probes send the pod IP as Host, and "
                    "DJANGO_ALLOWED_HOSTS does not include $(POD_IP) = status.podIP"
                )
    return problems


def _host_allowed(resources: list[Resource], where: str, host: str) -> list[str]:
    """The dashboard answers `host` and trusts https://host for CSRF."""
    problems = []
    for _, _, c in containers(resources):
        if not any(p.get("name") == "http" for p in c.get("ports", [])):
            continue
        env = environment(resources, c)
        if host not in str(env.get("DJANGO_ALLOWED_HOSTS", "")).split(","):
            problems.append(f"{where}: {host} is not in DJANGO_ALLOWED_HOSTS")
        origins = str(env.get("DJANGO_CSRF_TRUSTED_ORIGINS", "")).split(",")
        if f"https://{host}" not in origins:
            problems.append(f"{where}: https://{host} is not a CSRF trusted origin")
    return problems


def check_references(resources: list[Resource]) -> list[str]:
    """Services, the PodDisruptionBudget and the ServiceMonitor select pods or
    Services that exist, by port names that exist; the Ingress sends to a
    Service port that exists, for a host the dashboard allows (and trusts for
    CSRF); KEDA scales a Deployment that exists."""
    problems = []
    pod_labels = [
        (r, r["spec"]["template"]["metadata"].get("labels", {}), spec)
        for r, spec in pods(resources)
    ]

    def selected(selector: dict[str, str]) -> list[tuple[Resource, dict[str, Any]]]:
        return [
            (r, spec)
            for r, labels, spec in pod_labels
            if selector and selector.items() <= labels.items()
        ]

    services = [r for r in resources if r["kind"] == "Service"]
    for svc in services:
        chosen = selected(svc["spec"].get("selector", {}))
        if not chosen:
            problems.append(f"{name_of(svc)}: selects no pods")
        for port in svc["spec"]["ports"]:
            target = port.get("targetPort", port["port"])
            for r, spec in chosen:
                exposed = [p for c in spec["containers"] for p in c.get("ports", [])]
                if not any(
                    target in (p.get("name"), p["containerPort"]) for p in exposed
                ):
                    problems.append(
                        f"{name_of(svc)}: {name_of(r)} has no port {target}"
                    )
    for pdb in (r for r in resources if r["kind"] == "PodDisruptionBudget"):
        if not selected(pdb["spec"]["selector"].get("matchLabels", {})):
            problems.append(f"{name_of(pdb)}: selects no pods")
    for sm in (r for r in resources if r["kind"] == "ServiceMonitor"):
        labels = sm["spec"]["selector"].get("matchLabels", {})
        matching = [
            s for s in services if labels.items() <= s["metadata"]["labels"].items()
        ]
        if not matching:
            problems.append(f"{name_of(sm)}: selects no Service")
        for ep in sm["spec"]["endpoints"]:
            if not any(
                ep.get("port") == p.get("name")
                for s in matching
                for p in s["spec"]["ports"]
            ):
                problems.append(f"{name_of(sm)}: no Service port {ep.get('port')}")
    for ing in (r for r in resources if r["kind"] == "Ingress"):
        for rule in ing["spec"].get("rules", []):
            for http_path in rule.get("http", {}).get("paths", []):
                backend = http_path["backend"]["service"]
                svc = _find(resources, "Service", backend["name"])
                port = backend["port"].get("name", backend["port"].get("number"))
                if svc is None or not any(
                    port in (p.get("name"), p["port"]) for p in svc["spec"]["ports"]
                ):
                    problems.append(f"{name_of(ing)}: no Service port {port}")
            problems += _host_allowed(resources, name_of(ing), rule.get("host", ""))
    for so in (r for r in resources if r["kind"] == "ScaledObject"):
        ref = so["spec"]["scaleTargetRef"]
        if not _find(resources, ref.get("kind", "Deployment"), ref["name"]):
            problems.append(f"{name_of(so)}: no Deployment {ref['name']}")
    return problems


def check_scrape_once(resources: list[Resource]) -> list[str]:
    """Each ServiceMonitor endpoint scrapes ONE target: its relabelings set
    every pod's address to the dashboard Service (namespace included) and drop
    the per-pod labels, so Prometheus keeps one of the identical targets; and
    that Service's name is in the dashboard's DJANGO_ALLOWED_HOSTS."""
    problems = []
    services = {
        f"{s['metadata']['name']}.{s['metadata'].get('namespace', 'default')}.svc:"
        f"{p['port']}": s
        for s in resources
        if s["kind"] == "Service"
        for p in s["spec"]["ports"]
    }
    for sm in (r for r in resources if r["kind"] == "ServiceMonitor"):
        for ep in sm["spec"]["endpoints"]:
            relabel = ep.get("relabelings", [])
            address = [
                x.get("replacement")
                for x in relabel
                if x.get("targetLabel") == "__address__"
            ]
            dropped = [
                x.get("regex", "")
                for x in relabel
                if x.get("action", "").lower() == "labeldrop"
            ]
            if not address or not any(re.fullmatch(d, "pod") for d in dropped):
                problems.append(
                    f"{name_of(sm)}: scrapes every dashboard pod (each series "
                    "once per pod): relabel __address__ to the Service, drop pod"
                )
                continue
            service = services.get(str(address[0]))
            if service is None:
                problems.append(
                    f"{name_of(sm)}: {address[0]} is not the Service "
                    + ", ".join(sorted(a.rpartition(".svc")[0] for a in services))
                )
                continue
            host = str(address[0]).rpartition(":")[0]
            for r, _, c in containers(resources):
                if not any(p.get("name") == "http" for p in c.get("ports", [])):
                    continue
                allowed = str(environment(resources, c).get("DJANGO_ALLOWED_HOSTS"))
                if host not in allowed.split(","):
                    problems.append(
                        f"{name_of(r)} {c['name']}: Host {host} is not in "
                        "DJANGO_ALLOWED_HOSTS"
                    )
    return problems


def check_drain(resources: list[Resource]) -> list[str]:
    """Pods running a GPU supervisor outlast its drain: the grace period is
    above BULLPEN_DRAIN_TIMEOUT_S (as these manifests set it) plus the kill
    grace, and a preStop drain's --timeout fits in the grace period."""
    problems = []
    for r, spec, c in containers(resources):
        if not is_supervisor(c):
            continue
        env = environment(resources, c)
        drain = float(env.get("BULLPEN_DRAIN_TIMEOUT_S", DRAIN_TIMEOUT_S))
        grace = spec.get("terminationGracePeriodSeconds", 30)
        where = f"{name_of(r)} {c['name']}"
        if not grace > drain + DRAIN_KILL_GRACE_S:
            problems.append(
                f"{where}: terminationGracePeriodSeconds {grace} is not above "
                f"BULLPEN_DRAIN_TIMEOUT_S {drain:g} + {DRAIN_KILL_GRACE_S:g} s"
            )
        hook = c.get("lifecycle", {}).get("preStop", {}).get("exec", {})
        argv = hook.get("command", [])
        if "--timeout" in argv:
            timeout = float(argv[argv.index("--timeout") + 1])
            if not drain + DRAIN_KILL_GRACE_S <= timeout < grace:
                problems.append(
                    f"{where}: preStop drain --timeout {timeout:g} must cover the "
                    f"drain ({drain + DRAIN_KILL_GRACE_S:g} s) and end within "
                    f"the grace period ({grace} s)"
                )
    return problems


def check_gpu_requests(resources: list[Resource]) -> list[str]:
    """Every supervisor container has a GPU limit (the only way Kubernetes
    gives a pod GPUs; the request defaults to it)."""
    problems = []
    for r, _, c in containers(resources):
        if not is_supervisor(c):
            continue
        limits = c.get("resources", {}).get("limits", {})
        if int(limits.get(GPU_RESOURCE, 0)) < 1:
            problems.append(f"{name_of(r)} {c['name']}: no {GPU_RESOURCE} limit")
    return problems


def queries(resources: list[Resource]) -> Iterator[tuple[str, str]]:
    """(where, PromQL) of the KEDA triggers, alert rules and scrape relabelings."""
    for r in resources:
        if r["kind"] == "ScaledObject":
            for t in r["spec"].get("triggers", []):
                yield name_of(r), str(t.get("metadata", {}).get("query", ""))
        elif r["kind"] == "PrometheusRule":
            for g in r["spec"].get("groups", []):
                for rule in g.get("rules", []):
                    yield name_of(r), str(rule.get("expr", ""))
        elif r["kind"] == "ServiceMonitor":
            for ep in r["spec"].get("endpoints", []):
                for relabel in ep.get("metricRelabelings", []):
                    yield name_of(r), str(relabel.get("regex", ""))


def check_metric_names(resources: list[Resource], exported: set[str]) -> list[str]:
    """Every bullpen_* name in a query is one that /metrics exports."""
    problems = []
    for where, query in queries(resources):
        for name in sorted(set(METRIC.findall(query)) - exported):
            problems.append(f"{where}: /metrics exports no {name}")
    return problems


def documented_variables() -> set[str]:
    """The names docs/configuration.md shows in backticks."""
    text = (ROOT / "docs" / "configuration.md").read_text()
    return set(re.findall(r"`([A-Z][A-Z0-9_]+)`", text))


def check_env_documented(resources: list[Resource], documented: set[str]) -> list[str]:
    """Every variable set for a container (env, or a ConfigMap it loads) is in
    docs/configuration.md, but for those set only to be expanded as $(NAME) in
    another of the same container's values."""
    problems = []
    for r, _, c in containers(resources):
        names = set()
        for source in c.get("envFrom", []):
            ref = source.get("configMapRef")
            cm = ref and _find(resources, "ConfigMap", ref["name"])
            names |= set(cm.get("data", {})) if cm else set()
        names |= {var["name"] for var in c.get("env", [])}
        used = {
            m
            for var in c.get("env", [])
            for m in REFERENCE.findall(var.get("value", ""))
        }
        for name in sorted(names - documented):
            if name not in used:
                problems.append(
                    f"{name_of(r)} {c['name']}: {name} is not in docs/configuration.md"
                )
    return problems


def check_secrets(resources: list[Resource]) -> list[str]:
    """Secret settings come from a Secret by reference: never a literal in a
    workload or a key of a ConfigMap."""
    problems = []
    for r, _, c in containers(resources):
        for var in c.get("env", []):
            if var["name"] in SECRET_SETTINGS and "secretKeyRef" not in var.get(
                "valueFrom", {}
            ):
                problems.append(
                    f"{name_of(r)} {c['name']}: {var['name']} is not a secretKeyRef"
                )
    for cm in (r for r in resources if r["kind"] == "ConfigMap"):
        for key in sorted(SECRET_SETTINGS & set(cm.get("data", {}))):
            problems.append(f"{name_of(cm)}: holds {key}, which belongs in a Secret")
    return problems


def all_problems(resources: list[Resource], exported: set[str]) -> list[str]:
    """Every semantic check over one rendering."""
    return (
        check_commands(resources)
        + check_probes(resources)
        + check_references(resources)
        + check_scrape_once(resources)
        + check_drain(resources)
        + check_gpu_requests(resources)
        + check_metric_names(resources, exported)
        + check_env_documented(resources, documented_variables())
        + check_secrets(resources)
    )
