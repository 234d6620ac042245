"""The Helm chart's pods (security, resources, configuration), images, the `helm test` pod,
NOTES.txt and the values schema's rejections."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import helm_python
import pytest
from chart_render import (
    APP_VERSION,
    CHART_DIR,
    CONTROL_PLANE,
    NAMESPACE,
    RELEASE,
    SERVICE,
    SERVICE_HOST,
    SUBWORKER,
    Rendering,
    ValueSet,
    build,
    labels_of,
    merged,
    nng_scheme,
    render,
)
from fake_cli import helm_test_pod, run_test_pod
from helm_python.errors import HelmRenderError, HelmValuesError

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
    if rendering.value_set.id == "hpa":  # merged into the defaults, key by key
        assert rendering.container(CONTROL_PLANE)["resources"] == {
            "requests": {"cpu": "250m", "memory": "256Mi"},
            "limits": {"memory": "512Mi"},
        }
        assert rendering.container(SUBWORKER)["resources"] == {
            "requests": {"cpu": "250m", "memory": "256Mi"},
            "limits": {"memory": "1Gi"},
        }


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


def test_each_component_traces_under_its_own_service_name_with_its_pod_and_namespace(
    rendering: Rendering,
) -> None:
    traced = bool(rendering.values["telemetry"]["otlpEndpoint"])
    for component, name in (
        (CONTROL_PLANE, "fastworker-control-plane"),
        (SUBWORKER, "fastworker-subworker"),
    ):
        env = {e["name"]: e for e in rendering.container(component).get("env", [])}
        if not traced:
            assert "OTEL_SERVICE_NAME" not in env, component
            continue
        assert env["OTEL_SERVICE_NAME"]["value"] == name
        assert env["K8S_POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
        attributes = env["OTEL_RESOURCE_ATTRIBUTES"]["value"]
        assert attributes == "k8s.pod.name=$(K8S_POD_NAME),k8s.namespace.name=$(K8S_NAMESPACE)"


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
    assert f"--address {nng_scheme(rendering)}{SERVICE_HOST}:5555" in script
    assert "--task-name fastworker.echo" in script


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
        "tls_ca": None,
        "tls_server_name": None,
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
    assert f"  discovery  {nng_scheme(rendering)}{SERVICE_HOST}:5550\n" in notes


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


# --- the auth token -----------------------------------------------------------------------------


def token_sources(r: Rendering) -> dict[str, Any]:
    """Where each pod reads FASTWORKER_AUTH_TOKEN from, by component."""
    pods = {c: r.container(c) for c in (CONTROL_PLANE, SUBWORKER)}
    for pod in r.of_kind("Pod"):
        pods["test"] = pod["spec"]["containers"][0]
    return {
        name: e.get("valueFrom")
        for name, c in pods.items()
        for e in c.get("env", [])
        if e["name"] == "FASTWORKER_AUTH_TOKEN"
    }


def test_with_auth_every_pod_reads_the_token_from_the_secret_and_monitors_send_it(
    renderings: dict[str, Rendering],
) -> None:
    r = renderings["auth"]
    [secret] = r.of_kind("Secret")
    assert secret["stringData"] == {"token": "a-test-token"}
    reference = {"secretKeyRef": {"name": secret["metadata"]["name"], "key": "token"}}
    assert token_sources(r) == {CONTROL_PLANE: reference, SUBWORKER: reference, "test": reference}
    for monitor in r.of_kind("ServiceMonitor") + r.of_kind("PodMonitor"):
        endpoints = monitor["spec"].get("endpoints") or monitor["spec"]["podMetricsEndpoints"]
        assert endpoints[0]["authorization"] == {
            "type": "Bearer",
            "credentials": {"name": secret["metadata"]["name"], "key": "token"},
        }


def test_without_auth_no_pod_reads_a_token(rendering: Rendering) -> None:
    if rendering.value_set.id != "auth":
        assert token_sources(rendering) == {}
        assert rendering.of_kind("Secret") == []


def test_an_existing_secret_is_used_instead_of_creating_one() -> None:
    r = build(ValueSet("mine", {"auth": {"enabled": True, "existingSecret": "mine"}}, frozenset()))
    assert r.of_kind("Secret") == []
    assert token_sources(r)[SUBWORKER] == {"secretKeyRef": {"name": "mine", "key": "token"}}


def test_auth_without_a_token_or_a_secret_is_refused_with_a_clear_message() -> None:
    message = re.escape("auth.enabled needs auth.existingSecret or auth.token")
    with pytest.raises(HelmRenderError, match=message):
        render(merged({"auth": {"enabled": True}}))
