"""The Helm chart (deploy/helm/fastworker), rendered and linted by real Helm (v4, in process
through helm-python-sdk) and validated with kubernetes-validate, for the default values and
for value sets that switch every optional piece on or off.

Nothing here needs a cluster: the objects are checked the way the API server and the
controllers would read them (selectors against pod labels, named ports against container
ports, the test pod's shell command run against a stand-in ``fastworker``).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import helm_python
import kubernetes_validate
import pytest
import yaml
from helm_python.errors import HelmValuesError

ROOT = Path(__file__).resolve().parent.parent
CHART_DIR = ROOT / "deploy" / "helm" / "fastworker"
CHART_META: dict[str, Any] = yaml.safe_load((CHART_DIR / "Chart.yaml").read_text())
APP_VERSION = str(CHART_META["appVersion"])

RELEASE, NAMESPACE = "fw", "jobs"
FULLNAME = f"{RELEASE}-fastworker"
SERVICE = f"{FULLNAME}-control-plane"
SERVICE_HOST = f"{SERVICE}.{NAMESPACE}.svc"
CONTROL_PLANE, SUBWORKER = "control-plane", "subworker"

# Kinds kubernetes-validate has no schema for (custom resources of KEDA and the
# prometheus-operator): it can only WARN "Couldn't find schema" about them, so only these
# kinds are left out of its run; the tests below check their content instead.
CUSTOM_RESOURCE_KINDS = frozenset({"ScaledObject", "ServiceMonitor", "PodMonitor"})
KUBE_VERSIONS = ("1.30.0", kubernetes_validate.latest_version())

EXPECTED_PORTS = {
    "discovery": 5550,
    "submit-critical": 5555,
    "submit-high": 5556,
    "submit-normal": 5557,
    "submit-low": 5558,
    "results": 5559,
    "registration": 5560,
    "http": 8080,
}


# --- value sets -------------------------------------------------------------------------


@dataclass(frozen=True)
class ValueSet:
    id: str
    values: dict[str, Any]
    # Templates (relative to templates/) that must render to a manifest; the rest to nothing.
    templates: frozenset[str]


ALWAYS = frozenset(
    {
        "configmap.yaml",
        "control-plane-deployment.yaml",
        "control-plane-service.yaml",
        "subworker-deployment.yaml",
    }
)

VALUE_SETS = [
    ValueSet("default", {}, ALWAYS | {"subworker-pdb.yaml", "tests/test-submit.yaml"}),
    ValueSet(
        "hpa",
        {
            "subworker": {
                "autoscaling": {"enabled": True, "minReplicas": 3, "maxReplicas": 7},
                "resources": {"requests": {"cpu": "250m"}},
                "shutdownTimeout": 120,
            },
            "controlPlane": {"resources": {"limits": {"memory": "512Mi"}}},
            "telemetry": {"otlpEndpoint": "http://jaeger-collector.tracing:4318"},
        },
        ALWAYS | {"subworker-hpa.yaml", "subworker-pdb.yaml", "tests/test-submit.yaml"},
    ),
    ValueSet(
        "custom-image",
        {
            "image": {"registry": "registry.example.com/team"},
            "imagePullSecrets": [{"name": "regcred"}],
            "taskModules": ["acme.tasks", "fastworker.diagnostics"],
            "subworker": {
                "image": {"repository": "acme/fastworker-tasks", "tag": "2.3.4"},
                "podLabels": {"example.com/tier": "batch"},
            },
            "controlPlane": {"podAnnotations": {"example.com/owner": "payments"}},
        },
        ALWAYS | {"subworker-pdb.yaml", "tests/test-submit.yaml"},
    ),
    ValueSet(
        "everything-off",
        {
            "tests": {"enabled": False},
            "subworker": {"podDisruptionBudget": {"enabled": False}},
            "telemetry": {
                "scrapeAnnotations": False,
                "serviceMonitor": {"enabled": False},
                "podMonitor": {"enabled": False},
            },
        },
        ALWAYS,
    ),
    ValueSet(
        "keda-and-monitors",
        {
            "subworker": {"keda": {"enabled": True, "minReplicaCount": 0, "maxReplicaCount": 12}},
            "telemetry": {"serviceMonitor": {"enabled": True}, "podMonitor": {"enabled": True}},
        },
        ALWAYS
        | {
            "subworker-scaledobject.yaml",
            "servicemonitor.yaml",
            "podmonitor.yaml",
            "subworker-pdb.yaml",
            "tests/test-submit.yaml",
        },
    ),
]
BY_ID = {v.id: v for v in VALUE_SETS}
IDS = [v.id for v in VALUE_SETS]


def merged(overrides: dict[str, Any]) -> dict[str, Any]:
    """The chart's values.yaml with ``overrides`` merged in (as Helm coalesces them)."""

    def merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
        out = copy.deepcopy(base)
        for key, value in extra.items():
            if isinstance(value, dict) and isinstance(out.get(key), dict):
                out[key] = merge(out[key], value)
            else:
                out[key] = copy.deepcopy(value)
        return out

    return merge(yaml.safe_load((CHART_DIR / "values.yaml").read_text()), overrides)


# --- a YAML loader that refuses duplicate keys ----------------------------------------------


class UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that raises on a mapping key given twice (PyYAML silently keeps the last,
    and so would the API server's JSON decoding, hiding a label or env var that was lost)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key {key!r}",
                    key_node.start_mark,
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_all(text: str, loader: type[yaml.SafeLoader] = UniqueKeyLoader) -> list[dict[str, Any]]:
    return [doc for doc in yaml.load_all(text, Loader=loader) if doc]


# --- rendering ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Rendering:
    value_set: ValueSet
    values: dict[str, Any]  # values.yaml with the set's overrides merged in
    manifests: dict[str, str]  # template path (relative to templates/) -> rendered text
    objects: list[tuple[str, dict[str, Any]]]  # (template, object)
    notes: str

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [obj for _, obj in self.objects if obj["kind"] == kind]

    def one(self, kind: str, component: str | None = None) -> dict[str, Any]:
        found = [
            obj
            for obj in self.of_kind(kind)
            if component is None or labels_of(obj).get("app.kubernetes.io/component") == component
        ]
        assert len(found) == 1, f"expected one {kind} {component or ''}, got {len(found)}"
        return found[0]

    def deployment(self, component: str) -> dict[str, Any]:
        return self.one("Deployment", component)

    def container(self, component: str) -> dict[str, Any]:
        [container] = self.deployment(component)["spec"]["template"]["spec"]["containers"]
        return container

    def pod_templates(self) -> Iterator[tuple[str, dict[str, Any]]]:
        for _, obj in self.objects:
            if obj["kind"] == "Deployment":
                yield obj["metadata"]["name"], obj["spec"]["template"]
            elif obj["kind"] == "Pod":
                yield obj["metadata"]["name"], obj


def labels_of(obj: dict[str, Any]) -> dict[str, str]:
    return obj.get("metadata", {}).get("labels") or {}


def matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def render(values: dict[str, Any]) -> dict[str, str]:
    chart = helm_python.Chart.load(CHART_DIR)
    rendered = chart.render(copy.deepcopy(values), name=RELEASE, namespace=NAMESPACE)
    prefix = f"{CHART_META['name']}/templates/"
    assert all(path.startswith(prefix) for path in rendered), sorted(rendered)
    return {path.removeprefix(prefix): text for path, text in rendered.items()}


def build(value_set: ValueSet) -> Rendering:
    rendered = render(value_set.values)
    notes = rendered.pop("NOTES.txt")
    manifests = {path: text for path, text in rendered.items() if text.strip()}
    # Parsed as kubectl would (the last of duplicate keys wins); the duplicate-key test
    # parses every manifest again with UniqueKeyLoader, so a duplicate fails just that test.
    objects = [
        (path, obj)
        for path, text in manifests.items()
        for obj in load_all(text, loader=yaml.SafeLoader)
    ]
    return Rendering(value_set, merged(value_set.values), manifests, objects, notes)


@pytest.fixture(scope="module")
def renderings() -> dict[str, Rendering]:
    """Every value set, rendered once by real Helm."""
    return {v.id: build(v) for v in VALUE_SETS}


@pytest.fixture(scope="module", params=IDS)
def rendering(request: pytest.FixtureRequest, renderings: dict[str, Rendering]) -> Rendering:
    return renderings[request.param]


def arg_value(container: dict[str, Any], flag: str) -> str:
    values = [a.split("=", 1)[1] for a in container["args"] if a.startswith(f"{flag}=")]
    assert len(values) == 1, f"{flag}= given {len(values)} times in {container['args']}"
    return values[0]


# --- the chart as a whole -------------------------------------------------------------------


def test_the_duplicate_key_loader_rejects_a_key_given_twice() -> None:
    with pytest.raises(yaml.constructor.ConstructorError, match="duplicate key 'app'"):
        load_all("metadata:\n  labels:\n    app: a\n    app: b\n")
    assert load_all("a: 1\nb: {a: 2}\n") == [{"a": 1, "b": {"a": 2}}]


@pytest.mark.parametrize("value_set", IDS)
def test_every_value_set_passes_the_values_schema(value_set: str) -> None:
    helm_python.Chart.load(CHART_DIR).validate_schema(copy.deepcopy(BY_ID[value_set].values))


@pytest.mark.parametrize("value_set", IDS)
def test_helm_lint_strict_reports_no_warnings_or_errors(value_set: str) -> None:
    result = helm_python.lint(
        CHART_DIR, copy.deepcopy(BY_ID[value_set].values), strict=True, kube_version="v1.30.0"
    )
    assert result["total_charts_linted"] == 1
    problems = [m for m in result["messages"] if m["severity"] >= 2]
    assert problems == []
    assert result["errors"] == []


def test_each_value_set_renders_exactly_the_templates_it_switches_on(
    rendering: Rendering,
) -> None:
    assert set(rendering.manifests) == rendering.value_set.templates


def test_no_rendered_manifest_repeats_a_mapping_key(rendering: Rendering) -> None:
    for path, text in rendering.manifests.items():
        docs = load_all(text)  # raises on a duplicate key
        assert docs, f"{path} rendered no object"


@dataclass(frozen=True)
class Validation:
    returncode: int
    output: str
    files: dict[str, int]  # file name -> objects in it


def kubernetes_validate_cli() -> list[str]:
    """The CLI as a user runs it: ``python -m kubernetes_validate`` when the module is
    runnable, else the console script next to this interpreter."""
    probe = subprocess.run(
        [sys.executable, "-m", "kubernetes_validate", "--version"],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode == 0:
        return [sys.executable, "-m", "kubernetes_validate"]
    script = Path(sys.executable).with_name("kubernetes-validate")
    assert script.exists(), f"kubernetes-validate not runnable: {probe.stderr}"
    return [str(script)]


@pytest.fixture(scope="module")
def validations(
    renderings: dict[str, Rendering], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Validation]:
    """One kubernetes-validate run (every manifest, both versions) per value set."""
    cli = kubernetes_validate_cli()
    versions = [arg for version in KUBE_VERSIONS for arg in ("-k", version)]
    results = {}
    for value_set, r in renderings.items():
        directory = tmp_path_factory.mktemp(f"manifests-{value_set}")
        files: dict[str, int] = {}
        for path, text in r.manifests.items():
            kinds = {obj["kind"] for obj in load_all(text, loader=yaml.SafeLoader)}
            if kinds <= CUSTOM_RESOURCE_KINDS:
                continue
            assert not kinds & CUSTOM_RESOURCE_KINDS, f"{path} mixes custom resources in"
            target = directory / path.replace("/", "__")
            target.write_text(text)
            files[str(target)] = len(load_all(text, loader=yaml.SafeLoader))
        proc = subprocess.run(
            [*cli, "--strict", *versions, *files],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        results[value_set] = Validation(proc.returncode, proc.stdout + proc.stderr, files)
    return results


@pytest.mark.parametrize("value_set", IDS)
def test_every_manifest_validates_strictly_against_kubernetes_1_30_and_the_newest(
    value_set: str, validations: dict[str, Validation]
) -> None:
    result = validations[value_set]
    assert result.returncode == 0, result.output
    assert "WARN" not in result.output, result.output
    assert "ERROR" not in result.output, result.output
    for file, count in result.files.items():
        passed = [
            line
            for line in result.output.splitlines()
            if line.startswith(f"INFO {file} passed for resource")
        ]
        assert len(passed) == count * len(KUBE_VERSIONS), result.output


def test_custom_resources_left_to_kubernetes_validate_are_only_keda_and_prometheus_kinds(
    renderings: dict[str, Rendering],
) -> None:
    kinds = {obj["kind"]: obj["apiVersion"] for r in renderings.values() for _, obj in r.objects}
    custom = {k: v for k, v in kinds.items() if k in CUSTOM_RESOURCE_KINDS}
    assert custom == {
        "ScaledObject": "keda.sh/v1alpha1",
        "ServiceMonitor": "monitoring.coreos.com/v1",
        "PodMonitor": "monitoring.coreos.com/v1",
    }


# --- labels -----------------------------------------------------------------------------

# The component each template's objects belong to (None: any, e.g. what both share).
COMPONENT_OF = {
    "configmap.yaml": None,
    "control-plane-deployment.yaml": CONTROL_PLANE,
    "control-plane-service.yaml": CONTROL_PLANE,
    "servicemonitor.yaml": CONTROL_PLANE,
    "subworker-deployment.yaml": SUBWORKER,
    "subworker-hpa.yaml": SUBWORKER,
    "subworker-pdb.yaml": SUBWORKER,
    "subworker-scaledobject.yaml": SUBWORKER,
    "podmonitor.yaml": SUBWORKER,
    "tests/test-submit.yaml": "test",
}


def label_cases() -> Iterator[Any]:
    for v in VALUE_SETS:
        for template in sorted(v.templates):
            yield pytest.param(v.id, template, id=f"{v.id}-{template}")


def assert_recommended_labels(labels: dict[str, str], where: str) -> None:
    assert labels.get("app.kubernetes.io/name") == "fastworker", where
    assert labels.get("app.kubernetes.io/instance") == RELEASE, where
    assert labels.get("app.kubernetes.io/version") == APP_VERSION, where
    assert labels.get("app.kubernetes.io/managed-by") == "Helm", where
    assert labels.get("app.kubernetes.io/component"), f"{where}: no component label"


@pytest.mark.parametrize(("value_set", "template"), list(label_cases()))
def test_every_object_carries_the_recommended_labels(
    value_set: str, template: str, renderings: dict[str, Rendering]
) -> None:
    objects = [obj for path, obj in renderings[value_set].objects if path == template]
    assert objects
    for obj in objects:
        where = f"{obj['kind']}/{obj['metadata']['name']}"
        assert_recommended_labels(labels_of(obj), where)
        if COMPONENT_OF[template] is not None:
            assert labels_of(obj)["app.kubernetes.io/component"] == COMPONENT_OF[template]


def test_every_pod_template_carries_the_recommended_labels(rendering: Rendering) -> None:
    for name, pod in rendering.pod_templates():
        assert_recommended_labels(labels_of(pod), f"pod template of {name}")
    for component in (CONTROL_PLANE, SUBWORKER):
        pod_labels = labels_of(rendering.deployment(component)["spec"]["template"])
        assert pod_labels["app.kubernetes.io/component"] == component


def test_each_deployment_selects_its_own_pods_and_not_the_others(rendering: Rendering) -> None:
    cp, sw = rendering.deployment(CONTROL_PLANE), rendering.deployment(SUBWORKER)
    cp_pods, sw_pods = labels_of(cp["spec"]["template"]), labels_of(sw["spec"]["template"])
    assert matches(cp["spec"]["selector"]["matchLabels"], cp_pods)
    assert not matches(cp["spec"]["selector"]["matchLabels"], sw_pods)
    assert matches(sw["spec"]["selector"]["matchLabels"], sw_pods)
    assert not matches(sw["spec"]["selector"]["matchLabels"], cp_pods)


# --- the control plane ----------------------------------------------------------------------


def test_the_control_plane_runs_exactly_one_replica_replaced_by_recreate(
    rendering: Rendering,
) -> None:
    spec = rendering.deployment(CONTROL_PLANE)["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "Recreate"}


def test_the_control_plane_service_exposes_every_named_port_to_the_control_plane_pods(
    rendering: Rendering,
) -> None:
    service = rendering.one("Service")
    assert service["metadata"]["name"] == SERVICE
    assert service["spec"]["type"] == "ClusterIP"
    ports = {p["name"]: p for p in service["spec"]["ports"]}
    assert {name: p["port"] for name, p in ports.items()} == EXPECTED_PORTS
    assert all(p["protocol"] == "TCP" for p in ports.values())

    cp = rendering.deployment(CONTROL_PLANE)
    container_ports = {
        p["name"]: p["containerPort"] for p in rendering.container(CONTROL_PLANE)["ports"]
    }
    for name, port in ports.items():
        assert container_ports[port["targetPort"]] == EXPECTED_PORTS[name]
    selector = service["spec"]["selector"]
    assert matches(selector, labels_of(cp["spec"]["template"]))
    assert not matches(selector, labels_of(rendering.deployment(SUBWORKER)["spec"]["template"]))


def test_the_control_plane_probes_readyz_to_start_and_serve_and_healthz_to_live(
    rendering: Rendering,
) -> None:
    container = rendering.container(CONTROL_PLANE)
    probes = {
        kind: container[kind]["httpGet"]
        for kind in ("startupProbe", "readinessProbe", "livenessProbe")
    }
    assert probes == {
        "startupProbe": {"path": "/readyz", "port": "http"},
        "readinessProbe": {"path": "/readyz", "port": "http"},
        "livenessProbe": {"path": "/healthz", "port": "http"},
    }


def test_the_control_plane_advertises_its_service_host_and_serves_http_on_8080(
    rendering: Rendering,
) -> None:
    container = rendering.container(CONTROL_PLANE)
    assert f"--advertise-host={SERVICE_HOST}" in container["args"]
    assert "--http-port=8080" in container["args"]
    assert arg_value(container, "--discovery-port") == "5550"
    assert arg_value(container, "--base-port") == "5555"


def test_both_deployments_skip_service_links(rendering: Rendering) -> None:
    for name, pod in rendering.pod_templates():
        assert pod["spec"]["enableServiceLinks"] is False, name


def checksum(r: Rendering, component: str) -> str:
    annotations = r.deployment(component)["spec"]["template"]["metadata"]["annotations"]
    value: str = annotations["checksum/config"]
    return value


def test_both_pods_carry_the_checksum_of_the_rendered_configmap(rendering: Rendering) -> None:
    expected = hashlib.sha256(rendering.manifests["configmap.yaml"].encode()).hexdigest()
    assert checksum(rendering, CONTROL_PLANE) == checksum(rendering, SUBWORKER) == expected


def test_the_config_checksum_changes_when_the_task_modules_change(
    renderings: dict[str, Rendering],
) -> None:
    default = renderings["default"]
    changed = build(ValueSet("modules", {"taskModules": ["acme.tasks"]}, frozenset()))
    assert checksum(changed, CONTROL_PLANE) == checksum(changed, SUBWORKER)
    assert checksum(changed, CONTROL_PLANE) != checksum(default, CONTROL_PLANE)
    assert checksum(changed, SUBWORKER) != checksum(default, SUBWORKER)


# --- the subworkers -------------------------------------------------------------------------


def test_subworker_replicas_are_left_to_the_scaler_when_one_is_enabled(
    rendering: Rendering,
) -> None:
    spec = rendering.deployment(SUBWORKER)["spec"]
    sw = rendering.values["subworker"]
    if sw["autoscaling"]["enabled"] or sw["keda"]["enabled"]:
        assert "replicas" not in spec
    else:
        assert spec["replicas"] == sw["replicas"]
    if rendering.value_set.id == "default":
        assert spec["replicas"] == 2


def test_the_hpa_scales_the_subworker_deployment_within_the_configured_bounds(
    rendering: Rendering,
) -> None:
    hpas = rendering.of_kind("HorizontalPodAutoscaler")
    autoscaling = rendering.values["subworker"]["autoscaling"]
    if not autoscaling["enabled"]:
        assert hpas == []
        return
    [hpa] = hpas
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": rendering.deployment(SUBWORKER)["metadata"]["name"],
    }
    assert hpa["spec"]["minReplicas"] == autoscaling["minReplicas"] == 3
    assert hpa["spec"]["maxReplicas"] == autoscaling["maxReplicas"] == 7
    [metric] = hpa["spec"]["metrics"]
    assert metric["resource"]["name"] == "cpu"
    target = metric["resource"]["target"]["averageUtilization"]
    assert target == autoscaling["targetCPUUtilizationPercentage"]


def test_the_keda_scaled_object_scales_the_subworker_deployment_on_queue_depth(
    rendering: Rendering,
) -> None:
    scaled = rendering.of_kind("ScaledObject")
    keda = rendering.values["subworker"]["keda"]
    if not keda["enabled"]:
        assert scaled == []
        return
    [obj] = scaled
    assert (
        obj["spec"]["scaleTargetRef"]["name"] == rendering.deployment(SUBWORKER)["metadata"]["name"]
    )
    assert obj["spec"]["minReplicaCount"] == keda["minReplicaCount"] == 0
    assert obj["spec"]["maxReplicaCount"] == keda["maxReplicaCount"] == 12
    [trigger] = obj["spec"]["triggers"]
    assert trigger["type"] == "prometheus"
    assert "fastworker_queue_depth" in trigger["metadata"]["query"]
    assert f'service="{SERVICE}"' in trigger["metadata"]["query"]
    assert f'namespace="{NAMESPACE}"' in trigger["metadata"]["query"]


def test_a_subworker_needs_only_the_discovery_address_of_the_control_plane_service(
    rendering: Rendering,
) -> None:
    container = rendering.container(SUBWORKER)
    assert f"--discovery-address=tcp://{SERVICE_HOST}:5550" in container["args"]
    assert len([a for a in container["args"] if a.startswith("--discovery-address")]) == 1
    # No other address of the control plane is configured anywhere in the pod.
    others = [a for a in container["args"] if SERVICE in a and not a.startswith("--discovery")]
    assert others == []
    env = container.get("env", [])
    assert not [e for e in env if SERVICE in json.dumps(e)]
    config = rendering.one("ConfigMap")["data"]
    assert not [k for k, v in config.items() if SERVICE in v], config


def test_a_subworker_has_time_to_drain_before_it_is_killed(rendering: Rendering) -> None:
    deployment = rendering.deployment(SUBWORKER)
    container = rendering.container(SUBWORKER)
    pre_stop = container["lifecycle"]["preStop"]
    assert pre_stop, "no preStop hook"
    pause = 0.0
    if "exec" in pre_stop and pre_stop["exec"]["command"][0] == "sleep":
        pause = float(pre_stop["exec"]["command"][1])
    elif "sleep" in pre_stop:
        pause = float(pre_stop["sleep"]["seconds"])
    shutdown = float(arg_value(container, "--shutdown-timeout"))
    assert shutdown == rendering.values["subworker"]["shutdownTimeout"]
    grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace > shutdown + pause


def test_the_control_plane_also_has_time_to_drain_before_it_is_killed(
    rendering: Rendering,
) -> None:
    container = rendering.container(CONTROL_PLANE)
    grace = rendering.deployment(CONTROL_PLANE)["spec"]["template"]["spec"][
        "terminationGracePeriodSeconds"
    ]
    assert grace > float(arg_value(container, "--shutdown-timeout"))


def test_the_disruption_budget_selects_the_subworkers_and_not_the_control_plane(
    rendering: Rendering,
) -> None:
    budgets = rendering.of_kind("PodDisruptionBudget")
    if not rendering.values["subworker"]["podDisruptionBudget"]["enabled"]:
        assert budgets == []
        return
    [pdb] = budgets
    selector = pdb["spec"]["selector"]["matchLabels"]
    assert matches(selector, labels_of(rendering.deployment(SUBWORKER)["spec"]["template"]))
    assert not matches(selector, labels_of(rendering.deployment(CONTROL_PLANE)["spec"]["template"]))
    assert pdb["spec"]["maxUnavailable"] == 1


def test_the_monitors_select_the_control_plane_service_and_the_subworker_pods(
    rendering: Rendering,
) -> None:
    telemetry = rendering.values["telemetry"]
    service_monitors = rendering.of_kind("ServiceMonitor")
    pod_monitors = rendering.of_kind("PodMonitor")
    assert len(service_monitors) == int(telemetry["serviceMonitor"]["enabled"])
    assert len(pod_monitors) == int(telemetry["podMonitor"]["enabled"])
    for monitor in service_monitors:
        service = rendering.one("Service")
        assert matches(monitor["spec"]["selector"]["matchLabels"], labels_of(service))
        service_ports = {p["name"] for p in service["spec"]["ports"]}
        assert {e["port"] for e in monitor["spec"]["endpoints"]} <= service_ports
    for monitor in pod_monitors:
        pods = labels_of(rendering.deployment(SUBWORKER)["spec"]["template"])
        assert matches(monitor["spec"]["selector"]["matchLabels"], pods)
        names = {p["name"] for p in rendering.container(SUBWORKER)["ports"]}
        assert {e["port"] for e in monitor["spec"]["podMetricsEndpoints"]} <= names


# --- both pods ------------------------------------------------------------------------------


def test_every_pod_runs_as_non_root_with_a_read_only_root_and_no_capabilities(
    rendering: Rendering,
) -> None:
    for name, pod in rendering.pod_templates():
        security = pod["spec"]["securityContext"]
        assert security["runAsNonRoot"] is True, name
        assert security["runAsUser"] == 10001, name
        assert security["seccompProfile"] == {"type": "RuntimeDefault"}, name
        for container in pod["spec"]["containers"]:
            context = container["securityContext"]
            assert context["readOnlyRootFilesystem"] is True, name
            assert context["allowPrivilegeEscalation"] is False, name
            assert context["capabilities"]["drop"] == ["ALL"], name


def test_each_component_gets_its_own_resources(rendering: Rendering) -> None:
    for component, key in ((CONTROL_PLANE, "controlPlane"), (SUBWORKER, "subworker")):
        expected = rendering.values[key]["resources"]
        assert (rendering.container(component).get("resources") or {}) == expected, component
    if rendering.value_set.id == "hpa":
        assert rendering.container(CONTROL_PLANE)["resources"] == {"limits": {"memory": "512Mi"}}
        assert rendering.container(SUBWORKER)["resources"] == {"requests": {"cpu": "250m"}}


def test_both_components_read_the_shared_configmap_with_otlp_only_when_configured(
    rendering: Rendering,
) -> None:
    configmap = rendering.one("ConfigMap")
    for component in (CONTROL_PLANE, SUBWORKER):
        sources = rendering.container(component)["envFrom"]
        assert {"configMapRef": {"name": configmap["metadata"]["name"]}} in sources
    data = configmap["data"]
    endpoint = rendering.values["telemetry"]["otlpEndpoint"]
    if endpoint:
        assert data["OTEL_EXPORTER_OTLP_ENDPOINT"] == endpoint
    else:
        assert "OTEL_EXPORTER_OTLP_ENDPOINT" not in data
    assert data["FASTWORKER_TASK_MODULES"] == " ".join(rendering.values["taskModules"])


def test_pods_carry_prometheus_scrape_annotations_unless_switched_off(
    rendering: Rendering,
) -> None:
    ports = {CONTROL_PLANE: "8080", SUBWORKER: "9100"}
    for component, port in ports.items():
        annotations = rendering.deployment(component)["spec"]["template"]["metadata"].get(
            "annotations", {}
        )
        if rendering.values["telemetry"]["scrapeAnnotations"]:
            assert annotations["prometheus.io/scrape"] == "true"
            assert annotations["prometheus.io/port"] == port
            assert annotations["prometheus.io/path"] == "/metrics"
        else:
            assert not [k for k in annotations if k.startswith("prometheus.io/")]


def test_extra_pod_labels_and_annotations_reach_only_their_component(
    renderings: dict[str, Rendering],
) -> None:
    r = renderings["custom-image"]
    cp = r.deployment(CONTROL_PLANE)["spec"]["template"]
    sw = r.deployment(SUBWORKER)["spec"]["template"]
    assert cp["metadata"]["annotations"]["example.com/owner"] == "payments"
    assert "example.com/owner" not in sw["metadata"]["annotations"]
    assert labels_of(sw)["example.com/tier"] == "batch"
    assert "example.com/tier" not in labels_of(cp)
    for component in (CONTROL_PLANE, SUBWORKER):
        pod_spec = r.deployment(component)["spec"]["template"]["spec"]
        assert pod_spec["imagePullSecrets"] == [{"name": "regcred"}], component


def test_the_helm_test_pod_pulls_with_the_image_pull_secrets_too(
    renderings: dict[str, Rendering],
) -> None:
    pod = helm_test_pod(renderings["custom-image"])
    assert pod["spec"].get("imagePullSecrets") == [{"name": "regcred"}]


# --- images ---------------------------------------------------------------------------------


def test_the_default_images_are_tagged_with_the_app_version(
    renderings: dict[str, Rendering],
) -> None:
    r = renderings["default"]
    assert r.container(CONTROL_PLANE)["image"] == f"fastworker-control-plane:{APP_VERSION}"
    assert r.container(SUBWORKER)["image"] == f"fastworker-subworker:{APP_VERSION}"
    assert r.container(CONTROL_PLANE)["imagePullPolicy"] == "IfNotPresent"


def test_custom_images_are_registry_slash_repository_colon_tag(
    renderings: dict[str, Rendering],
) -> None:
    r = renderings["custom-image"]
    registry = "registry.example.com/team"
    assert r.container(SUBWORKER)["image"] == f"{registry}/acme/fastworker-tasks:2.3.4"
    assert r.container(CONTROL_PLANE)["image"] == f"{registry}/fastworker-control-plane:0.1.0"
    [test_pod] = r.of_kind("Pod")
    assert test_pod["spec"]["containers"][0]["image"] == r.container(CONTROL_PLANE)["image"]


# --- helm test ------------------------------------------------------------------------------

FAKE_FASTWORKER = """\
#!{python}
# A stand-in for the `fastworker` command: parses its argv with the real `submit` parser,
# records what it got, and answers like the echo task would (or with $FAKE_REPLY).
import argparse, json, os, sys
from fastworker.cli import client_commands
parser = argparse.ArgumentParser(prog="fastworker")
client_commands.add_commands(parser.add_subparsers(dest="command", required=True))
args = parser.parse_args(sys.argv[1:])
with open(os.environ["FAKE_RECORD"], "w") as f:
    json.dump({{"command": args.command, "address": args.address, "task": args.task_name,
               "args": args.args, "timeout": args.timeout}}, f)
reply = os.environ.get("FAKE_REPLY")
print(reply if reply is not None else json.dumps(json.loads(args.args[0])))
"""


def helm_test_pod(r: Rendering) -> dict[str, Any]:
    [pod] = r.of_kind("Pod")
    return pod


def test_the_helm_test_pod_exists_only_when_tests_are_enabled(rendering: Rendering) -> None:
    pods = rendering.of_kind("Pod")
    if not rendering.values["tests"]["enabled"]:
        assert pods == []
        return
    [pod] = pods
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    assert pod["spec"]["restartPolicy"] == "Never"
    [container] = pod["spec"]["containers"]
    script = " ".join(container["command"] + container["args"])
    assert "fastworker submit" in script
    assert f"--address tcp://{SERVICE_HOST}:5555" in script
    assert "--task-name fastworker.echo" in script


@pytest.fixture(scope="module")
def fake_fastworker(tmp_path_factory: pytest.TempPathFactory) -> Path:
    bin_dir = tmp_path_factory.mktemp("fake-bin")
    script = bin_dir / "fastworker"
    script.write_text(FAKE_FASTWORKER.format(python=sys.executable))
    script.chmod(0o755)
    return bin_dir


def run_test_pod(
    pod: dict[str, Any], bin_dir: Path, record: Path, reply: str | None
) -> subprocess.CompletedProcess[str]:
    [container] = pod["spec"]["containers"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("FASTWORKER_")}
    env |= {"PATH": f"{bin_dir}{os.pathsep}{env['PATH']}", "FAKE_RECORD": str(record)}
    if reply is not None:
        env["FAKE_REPLY"] = reply
    return subprocess.run(
        [*container["command"], *container["args"]],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=30,
    )


def test_the_helm_test_pod_submits_an_echo_task_through_the_service_and_checks_the_result(
    renderings: dict[str, Rendering], fake_fastworker: Path, tmp_path: Path
) -> None:
    pod = helm_test_pod(renderings["default"])
    [container] = pod["spec"]["containers"]
    assert container["command"] == ["sh", "-c"]

    record = tmp_path / "argv.json"
    ok = run_test_pod(pod, fake_fastworker, record, reply=None)
    assert ok.returncode == 0, ok.stderr
    assert 'result: "helm-test"' in ok.stdout
    assert json.loads(record.read_text()) == {
        "command": "submit",
        "address": f"tcp://{SERVICE_HOST}:5555",
        "task": "fastworker.echo",
        "args": ['"helm-test"'],
        "timeout": 60.0,
    }

    wrong = run_test_pod(pod, fake_fastworker, record, reply='"something else"')
    assert wrong.returncode != 0


def test_the_helm_test_pod_is_absent_when_tests_are_disabled(
    renderings: dict[str, Rendering],
) -> None:
    r = renderings["everything-off"]
    assert r.of_kind("Pod") == []
    assert "tests/test-submit.yaml" not in r.manifests


# --- NOTES.txt ------------------------------------------------------------------------------


def test_the_notes_explain_helm_test_the_dashboard_and_the_service_host(
    rendering: Rendering,
) -> None:
    notes = rendering.notes
    assert SERVICE_HOST in notes
    helm_test = f"helm test {RELEASE} --namespace {NAMESPACE}"
    if rendering.of_kind("Pod"):
        assert helm_test in notes
    else:  # tests.enabled is false: the notes must not send anyone to a test that is not there
        assert helm_test not in notes
        assert "no `helm test` pod" in notes
    dashboard = rf"kubectl port-forward --namespace {NAMESPACE} svc/{SERVICE} \d+:8080\b"
    assert re.search(dashboard, notes), notes
    assert f"tcp://{SERVICE_HOST}:5550" in notes


# --- the values schema ------------------------------------------------------------------------

# (values, the path the message must name, what it must say is wrong)
BAD_VALUES = [
    pytest.param(
        {"subworker": {"replicas": -1}},
        "at '/subworker/replicas'",
        "minimum",
        id="replicas-minus-1",
    ),
    pytest.param(
        {"subworkr": {"replicas": 3}},
        "'subworkr'",
        "not allowed",
        id="misspelled-top-level-key",
    ),
    pytest.param(
        {"ports": {"http": 70000}},
        "at '/ports/http'",
        "maximum",
        id="http-port-70000",
    ),
    pytest.param(
        {"image": {"pullPolicy": "Sometimes"}},
        "at '/image/pullPolicy'",
        "must be one of",
        id="pull-policy-sometimes",
    ),
    pytest.param(
        {"telemetry": {"otlpEndpoint": "jaeger:4318"}},
        "at '/telemetry/otlpEndpoint'",
        "does not match pattern",
        id="otlp-endpoint-without-scheme",
    ),
    pytest.param(
        {"taskModules": ["not a module"]},
        "at '/taskModules/0'",
        "does not match pattern",
        id="task-module-with-spaces",
    ),
    pytest.param(
        {"subworker": {"autoscaling": {"enabled": True}, "keda": {"enabled": True}}},
        "at '/subworker/keda/enabled'",
        "must be false",
        id="hpa-and-keda-together",
    ),
]


@pytest.mark.parametrize(("values", "path", "problem"), BAD_VALUES)
def test_the_schema_rejects_bad_values_naming_the_offending_path(
    values: dict[str, Any], path: str, problem: str
) -> None:
    with pytest.raises(HelmValuesError) as caught:
        helm_python.Chart.load(CHART_DIR).validate_schema(copy.deepcopy(values))
    assert path in str(caught.value)
    assert problem in str(caught.value)


@pytest.mark.parametrize(("values", "path", "problem"), BAD_VALUES)
def test_rendering_bad_values_fails_naming_the_offending_path(
    values: dict[str, Any], path: str, problem: str
) -> None:
    with pytest.raises(HelmValuesError) as caught:
        render(values)
    assert path in str(caught.value)
    assert problem in str(caught.value)
