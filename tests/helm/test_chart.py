"""The Helm chart as a whole (lint, kubernetes-validate), its labels, the control plane and
the subworkers, rendered by real Helm for the default values and for value sets that switch
every optional piece on or off.

Nothing here needs a cluster: the objects are checked the way the API server and the
controllers would read them (selectors against pod labels, named ports against container
ports, the test pod's shell command run against a stand-in ``fastworker``).
"""

from __future__ import annotations

import copy
import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import helm_python
import pytest
import yaml
from chart_render import (
    APP_VERSION,
    BY_ID,
    CHART_DIR,
    CONTROL_PLANE,
    CUSTOM_RESOURCE_KINDS,
    EXPECTED_PORTS,
    IDS,
    KUBE_VERSIONS,
    NAMESPACE,
    RELEASE,
    SERVICE,
    SERVICE_HOST,
    SUBWORKER,
    VALUE_SETS,
    Rendering,
    ValueSet,
    arg_value,
    build,
    labels_of,
    load_all,
    matches,
    nng_scheme,
)

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
    "auth-secret.yaml": None,
    "control-plane-deployment.yaml": CONTROL_PLANE,
    "control-plane-service.yaml": CONTROL_PLANE,
    "control-plane-pvc.yaml": CONTROL_PLANE,
    "servicemonitor.yaml": CONTROL_PLANE,
    "subworker-deployment.yaml": SUBWORKER,
    "subworker-hpa.yaml": SUBWORKER,
    "subworker-pdb.yaml": SUBWORKER,
    "subworker-scaledobject.yaml": SUBWORKER,
    "podmonitor.yaml": SUBWORKER,
    "tests/test-submit.yaml": "test",
    "networkpolicy.yaml": None,  # one policy per component, each labelled with its own
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
    scheme = nng_scheme(rendering)  # tls+tcp:// with tls.enabled
    assert f"--discovery-address={scheme}{SERVICE_HOST}:5550" in container["args"]
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
