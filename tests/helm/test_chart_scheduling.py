"""Resources, autoscaling, topology spread and NetworkPolicies of the Helm chart, rendered by
real Helm. (The network-policy value set of chart_render also goes through helm lint and
kubernetes-validate with every other set, in test_chart.py.)"""

from __future__ import annotations

import copy
import re
from typing import Any

import helm_python
import pytest
from chart_render import (
    CHART_DIR,
    CONTROL_PLANE,
    EXPECTED_PORTS,
    SUBWORKER,
    Rendering,
    ValueSet,
    build,
    labels_of,
    matches,
    merged,
    render,
)
from helm_python.errors import HelmRenderError, HelmValuesError

# --- resources and the HPA ------------------------------------------------------------------


def test_both_components_request_cpu_and_memory_and_limit_memory_by_default(
    renderings: dict[str, Rendering],
) -> None:
    r = renderings["default"]
    assert r.container(CONTROL_PLANE)["resources"] == {
        "requests": {"cpu": "250m", "memory": "256Mi"},
        "limits": {"memory": "1Gi"},
    }
    assert r.container(SUBWORKER)["resources"] == {
        "requests": {"cpu": "500m", "memory": "256Mi"},
        "limits": {"memory": "1Gi"},
    }


def test_the_hpa_with_the_default_resources_scales_on_a_cpu_request() -> None:
    r = build(
        ValueSet("hpa-defaults", {"subworker": {"autoscaling": {"enabled": True}}}, frozenset())
    )
    assert r.of_kind("HorizontalPodAutoscaler")
    assert r.container(SUBWORKER)["resources"]["requests"]["cpu"] == "500m"


NO_CPU_REQUEST = [
    pytest.param({"requests": {"cpu": None}}, id="cpu-request-nulled"),
    pytest.param({"requests": None}, id="requests-nulled"),
    pytest.param(None, id="resources-nulled"),
    pytest.param({"requests": {"cpu": ""}}, id="cpu-request-empty"),
]


@pytest.mark.parametrize("resources", NO_CPU_REQUEST)
def test_an_hpa_without_a_cpu_request_is_refused_with_a_clear_message(resources: Any) -> None:
    values = {"subworker": {"autoscaling": {"enabled": True}, "resources": resources}}
    message = re.escape("subworker.autoscaling.enabled needs subworker.resources.requests.cpu")
    with pytest.raises((HelmRenderError, HelmValuesError), match=message):
        render(values)


def test_without_the_hpa_a_cpu_request_can_be_dropped() -> None:
    r = build(
        ValueSet("no-cpu", {"subworker": {"resources": {"requests": {"cpu": None}}}}, frozenset())
    )
    assert r.container(SUBWORKER)["resources"] == {
        "requests": {"memory": "256Mi"},
        "limits": {"memory": "1Gi"},
    }


# --- topology spread ----------------------------------------------------------------------------


def spread(r: Rendering) -> Any:
    return r.deployment(SUBWORKER)["spec"]["template"]["spec"].get("topologySpreadConstraints")


def test_subworkers_spread_over_nodes_by_default_as_a_preference(
    renderings: dict[str, Rendering],
) -> None:
    r = renderings["default"]
    [constraint] = spread(r)
    assert constraint["topologyKey"] == "kubernetes.io/hostname"
    assert constraint["whenUnsatisfiable"] == "ScheduleAnyway"
    assert constraint["maxSkew"] == 1
    selector = constraint["labelSelector"]["matchLabels"]
    assert selector == r.deployment(SUBWORKER)["spec"]["selector"]["matchLabels"]
    assert matches(selector, labels_of(r.deployment(SUBWORKER)["spec"]["template"]))
    assert not matches(selector, labels_of(r.deployment(CONTROL_PLANE)["spec"]["template"]))
    assert (
        "topologySpreadConstraints" not in r.deployment(CONTROL_PLANE)["spec"]["template"]["spec"]
    )


def test_a_list_of_ones_own_replaces_the_default_spread(renderings: dict[str, Rendering]) -> None:
    r = renderings["network-policy"]
    [constraint] = spread(r)
    assert constraint["topologyKey"] == "topology.kubernetes.io/zone"
    assert constraint["whenUnsatisfiable"] == "DoNotSchedule"
    assert constraint["maxSkew"] == 2
    assert constraint["labelSelector"]["matchLabels"]["app.kubernetes.io/component"] == SUBWORKER


def test_a_labelselector_of_ones_own_is_kept_and_an_empty_list_turns_spreading_off() -> None:
    own = {"matchLabels": {"example.com/pool": "gpu"}}
    r = build(
        ValueSet(
            "own-selector",
            {
                "subworker": {
                    "topologySpreadConstraints": [
                        {
                            "maxSkew": 1,
                            "topologyKey": "kubernetes.io/hostname",
                            "whenUnsatisfiable": "ScheduleAnyway",
                            "labelSelector": own,
                        }
                    ]
                }
            },
            frozenset(),
        )
    )
    assert spread(r)[0]["labelSelector"] == own
    off = build(
        ValueSet("no-spread", {"subworker": {"topologySpreadConstraints": []}}, frozenset())
    )
    assert spread(off) is None


def test_the_schema_rejects_a_spread_constraint_with_a_bad_when_unsatisfiable() -> None:
    bad = {
        "subworker": {
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": "kubernetes.io/hostname",
                    "whenUnsatisfiable": "Maybe",
                }
            ]
        }
    }
    with pytest.raises(HelmValuesError, match="topologySpreadConstraints/0/whenUnsatisfiable"):
        helm_python.Chart.load(CHART_DIR).validate_schema(copy.deepcopy(bad))


# --- NetworkPolicy --------------------------------------------------------------------------------

NNG_PORTS = {p for name, p in EXPECTED_PORTS.items() if name != "http"}


def policies(r: Rendering) -> dict[str, dict[str, Any]]:
    return {labels_of(p)["app.kubernetes.io/component"]: p for p in r.of_kind("NetworkPolicy")}


def ports_of(rule: dict[str, Any]) -> set[int]:
    found = set()
    for port in rule["ports"]:
        assert port["protocol"] == "TCP"
        found |= set(range(port["port"], port.get("endPort", port["port"]) + 1))
    return found


def test_network_policies_are_off_by_default(rendering: Rendering) -> None:
    assert merged({})["networkPolicy"] == {"enabled": False, "allowFrom": [], "httpAllowFrom": []}
    if not rendering.values["networkPolicy"]["enabled"]:
        assert rendering.of_kind("NetworkPolicy") == []


def test_each_policy_selects_its_own_component_for_ingress_only(
    renderings: dict[str, Rendering],
) -> None:
    r = renderings["network-policy"]
    found = policies(r)
    assert set(found) == {CONTROL_PLANE, SUBWORKER}
    for component, policy in found.items():
        selector = policy["spec"]["podSelector"]["matchLabels"]
        other = SUBWORKER if component == CONTROL_PLANE else CONTROL_PLANE
        assert matches(selector, labels_of(r.deployment(component)["spec"]["template"]))
        assert not matches(selector, labels_of(r.deployment(other)["spec"]["template"]))
        assert policy["spec"]["policyTypes"] == ["Ingress"]


def test_the_nng_ports_admit_the_releases_pods_and_allow_from_and_http_only_http_allow_from(
    renderings: dict[str, Rendering],
) -> None:
    r = renderings["network-policy"]
    values = r.values["networkPolicy"]
    nng, http = policies(r)[CONTROL_PLANE]["spec"]["ingress"]
    assert ports_of(nng) == NNG_PORTS
    assert ports_of(http) == {EXPECTED_PORTS["http"]}
    # Every port of the Service is covered by exactly one rule.
    service_ports = {p["port"] for p in r.one("Service")["spec"]["ports"]}
    assert service_ports == ports_of(nng) | ports_of(http)
    assert not ports_of(nng) & ports_of(http)

    release, *others = nng["from"]
    assert others == values["allowFrom"]
    assert set(release) == {"podSelector"}  # this namespace's pods of this release
    own = release["podSelector"]["matchLabels"]
    for _, pod in r.pod_templates():  # subworkers, the helm test pod (and the control plane)
        assert matches(own, labels_of(pod))
    other_release = {**labels_of(r.deployment(SUBWORKER)["spec"]["template"])}
    other_release["app.kubernetes.io/instance"] = "another"
    assert not matches(own, other_release)
    assert http["from"] == values["httpAllowFrom"]


def test_subworkers_admit_only_their_metrics_port_from_http_allow_from(
    renderings: dict[str, Rendering],
) -> None:
    r = renderings["network-policy"]
    [rule] = policies(r)[SUBWORKER]["spec"]["ingress"]
    assert ports_of(rule) == {r.values["subworker"]["metricsPort"]}
    assert rule["from"] == r.values["networkPolicy"]["httpAllowFrom"]


def test_with_no_sources_given_only_the_releases_pods_reach_anything() -> None:
    r = build(ValueSet("netpol-bare", {"networkPolicy": {"enabled": True}}, frozenset()))
    found = policies(r)
    [nng] = found[CONTROL_PLANE]["spec"]["ingress"]
    assert ports_of(nng) == NNG_PORTS
    assert len(nng["from"]) == 1
    assert found[SUBWORKER]["spec"]["ingress"] == []


def test_the_policies_follow_changed_ports() -> None:
    r = build(
        ValueSet(
            "netpol-ports",
            {
                "networkPolicy": {"enabled": True, "httpAllowFrom": [{"podSelector": {}}]},
                "ports": {"discovery": 6000, "base": 6100, "http": 9000},
                "subworker": {"metricsPort": 9200},
            },
            frozenset(),
        )
    )
    nng, http = policies(r)[CONTROL_PLANE]["spec"]["ingress"]
    assert ports_of(nng) == {6000, *range(6100, 6106)}
    assert ports_of(http) == {9000}
    assert ports_of(policies(r)[SUBWORKER]["spec"]["ingress"][0]) == {9200}


@pytest.mark.parametrize(
    ("peer", "problem"),
    [
        pytest.param({"namespace": "shop"}, "not allowed", id="unknown-key"),
        pytest.param({}, "minProperties", id="empty-peer"),
        pytest.param(
            {"ipBlock": {"except": ["10.0.0.0/8"]}}, "missing property 'cidr'", id="no-cidr"
        ),
    ],
)
def test_the_schema_rejects_a_bad_source(peer: dict[str, Any], problem: str) -> None:
    bad = {"networkPolicy": {"enabled": True, "allowFrom": [peer]}}
    with pytest.raises(HelmValuesError) as caught:
        helm_python.Chart.load(CHART_DIR).validate_schema(copy.deepcopy(bad))
    assert "at '/networkPolicy/allowFrom/0" in str(caught.value)
    assert problem in str(caught.value)
