"""Replicated control planes in the Helm chart (``controlPlane.replicas`` 2 or more): a
StatefulSet with a claim per replica, the headless Service that names each replica, the
leader election (the chart's own Lease with a Role allowing only that Lease, or an etcd
URL), the disruption budget, the anti-affinity, the probes that let only the leader be
Ready (the values it refuses, and the README: ``test_chart_ha_refusals``).

Rendered by real Helm, linted, and validated with kubernetes-validate like the rest of the
chart; the rendered arguments and environment are read by the control plane's own parser
and election URL parser. What only a cluster could show is listed in the chart's README
("High availability").
"""

from __future__ import annotations

import argparse
import copy
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import helm_python
import pytest
from chart_render import (
    CHART_DIR,
    CONTROL_PLANE,
    CUSTOM_RESOURCE_KINDS,
    FULLNAME,
    KUBE_VERSIONS,
    NAMESPACE,
    SERVICE,
    SUBWORKER,
    Rendering,
    ValueSet,
    build,
    labels_of,
    load_all,
    matches,
    render,
)

from fastworker_control_plane.cli import configure_parser
from fastworker_control_plane.election.settings import (
    EtcdTarget,
    KubernetesTarget,
    parse_election_url,
)

NAME = f"{FULLNAME}-control-plane"  # the StatefulSet, its ServiceAccount, Role and Lease
PEERS = f"{FULLNAME}-control-plane-peers"
STATE_DIR = "/var/lib/fastworker"
REPLICATION_PORT = 5561
ETCD_URL = "etcd://etcd-0.etcd.infra.svc:2379,etcd-1.etcd.infra.svc:2379/fastworker-jobs"
HA_TEMPLATES = frozenset(
    {
        "configmap.yaml",
        "control-plane-statefulset.yaml",
        "control-plane-service.yaml",
        "control-plane-peers-service.yaml",
        "control-plane-rbac.yaml",
        "control-plane-pdb.yaml",
        "subworker-deployment.yaml",
        "subworker-pdb.yaml",
        "tests/test-submit.yaml",
    }
)
HA_SETS = [
    # Three replicas on the chart's own Lease, everything else as by default.
    ValueSet("ha-lease", {"controlPlane": {"replicas": 3}}, HA_TEMPLATES),
    # Two replicas elected through an etcd of the user's, with every HA value and the
    # optional pieces that meet the control plane (NetworkPolicy, ServiceMonitor, auth).
    ValueSet(
        "ha-etcd",
        {
            "controlPlane": {
                "replicas": 2,
                "ha": {
                    "leaderElection": ETCD_URL,
                    "leaseDuration": 8,
                    "syncReplicas": 1,
                    "requireSync": True,
                    "antiAffinity": "required",
                },
                "persistence": {
                    "size": "5Gi",
                    "storageClass": "fast-ssd",
                    "accessModes": ["ReadWriteOncePod"],
                    "annotations": {"example.com/backup": "daily"},
                },
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {
                                            "key": "example.com/disk",
                                            "operator": "In",
                                            "values": ["ssd"],
                                        }
                                    ]
                                }
                            ]
                        }
                    }
                },
            },
            "networkPolicy": {"enabled": True},
            "auth": {"enabled": True, "existingSecret": "fastworker-auth"},
            "telemetry": {"serviceMonitor": {"enabled": True}},
        },
        HA_TEMPLATES | {"networkpolicy.yaml", "servicemonitor.yaml"},
    ),
]
HA_IDS = [v.id for v in HA_SETS]


@pytest.fixture(scope="module")
def ha() -> dict[str, Rendering]:
    return {v.id: build(v) for v in HA_SETS}


def statefulset(r: Rendering) -> dict[str, Any]:
    return r.one("StatefulSet", CONTROL_PLANE)


def pod(r: Rendering) -> dict[str, Any]:
    spec: dict[str, Any] = statefulset(r)["spec"]["template"]
    return spec


def container(r: Rendering) -> dict[str, Any]:
    found: list[dict[str, Any]] = pod(r)["spec"]["containers"]
    assert len(found) == 1
    return found[0]


def services(r: Rendering) -> dict[str, dict[str, Any]]:
    return {s["metadata"]["name"]: s for s in r.of_kind("Service")}


def kubelet_env(r: Rendering, pod_name: str) -> dict[str, str]:
    """The control plane's environment as the kubelet makes it for pod ``pod_name``: the
    ConfigMap, then its own entries in order, the downward API's metadata.name filled in
    and ``$(VAR)`` references to earlier entries expanded."""
    env = dict(r.one("ConfigMap")["data"])
    for entry in container(r).get("env", []):
        if "value" in entry:
            env[entry["name"]] = re.sub(
                r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                lambda m: env.get(m.group(1), m.group(0)),
                entry["value"],
            )
        elif entry.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.name":
            env[entry["name"]] = pod_name
    return env


def parse_as_replica(
    r: Rendering, ordinal: int, monkeypatch: pytest.MonkeyPatch
) -> argparse.Namespace:
    """Replica ``ordinal``'s args, read by the control plane's own parser under its env."""
    with monkeypatch.context() as patch:
        for key in [k for k in os.environ if k.startswith("FASTWORKER_")]:
            patch.delenv(key)
        for key, value in kubelet_env(r, f"{NAME}-{ordinal}").items():
            patch.setenv(key, value)
        parser = configure_parser(argparse.ArgumentParser())
    return parser.parse_args(container(r)["args"])


# --- the chart as a whole ---------------------------------------------------------------


@pytest.mark.parametrize("value_set", HA_IDS)
def test_each_ha_value_set_passes_the_schema_and_helm_lint_strict(value_set: str) -> None:
    values = next(v.values for v in HA_SETS if v.id == value_set)
    helm_python.Chart.load(CHART_DIR).validate_schema(copy.deepcopy(values))
    result = helm_python.lint(CHART_DIR, copy.deepcopy(values), strict=True, kube_version="v1.30.0")
    assert [m for m in result["messages"] if m["severity"] >= 2] == []
    assert result["errors"] == []


@pytest.mark.parametrize("value_set", HA_IDS)
def test_each_ha_value_set_renders_exactly_its_templates_without_a_repeated_key(
    value_set: str, ha: dict[str, Rendering]
) -> None:
    r = ha[value_set]
    assert set(r.manifests) == r.value_set.templates
    for text in r.manifests.values():
        assert load_all(text)  # raises on a duplicate key
    assert not [
        d
        for d in r.of_kind("Deployment")
        if labels_of(d)["app.kubernetes.io/component"] == CONTROL_PLANE
    ]
    assert r.of_kind("PersistentVolumeClaim") == []  # the claims come from the StatefulSet


@pytest.mark.parametrize("value_set", HA_IDS)
def test_every_ha_manifest_validates_strictly_against_kubernetes_1_30_and_the_newest(
    value_set: str, ha: dict[str, Rendering], tmp_path: Path
) -> None:
    r = ha[value_set]
    files = []
    for path, text in r.manifests.items():
        if {o["kind"] for o in load_all(text)} <= CUSTOM_RESOURCE_KINDS:
            continue
        files.append(tmp_path / path.replace("/", "__"))
        files[-1].write_text(text)
    versions = [arg for version in KUBE_VERSIONS for arg in ("-k", version)]
    done = subprocess.run(
        [sys.executable, "-m", "kubernetes_validate", "--strict", *versions, *map(str, files)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "WARN" not in output, output
    assert "ERROR" not in output, output
    objects = sum(len(load_all(f.read_text())) for f in files)
    assert output.count(" passed for resource ") == objects * len(KUBE_VERSIONS), output


@pytest.mark.parametrize("value_set", HA_IDS)
def test_every_ha_object_carries_the_recommended_labels(
    value_set: str, ha: dict[str, Rendering]
) -> None:
    for path, obj in ha[value_set].objects:
        labels = labels_of(obj)
        assert labels["app.kubernetes.io/instance"] == "fw", path
        assert labels["app.kubernetes.io/managed-by"] == "Helm", path
        if path.startswith("control-plane-"):
            assert labels["app.kubernetes.io/component"] == CONTROL_PLANE, path


@pytest.mark.parametrize(
    "values",
    [
        {"controlPlane": {"replicas": 1}},
        {"controlPlane": {"replicas": 1, "ha": HA_SETS[1].values["controlPlane"]["ha"]}},
    ],
    ids=["explicit", "with-ha-values"],
)
def test_one_replica_renders_exactly_what_the_default_values_render(values: dict[str, Any]) -> None:
    assert render(values) == render({})


# --- the StatefulSet ------------------------------------------------------------------------


def test_the_statefulset_runs_the_replicas_in_parallel_and_is_updated_pod_by_pod_by_hand(
    ha: dict[str, Rendering],
) -> None:
    spec = statefulset(ha["ha-lease"])["spec"]
    assert statefulset(ha["ha-lease"])["metadata"]["name"] == NAME
    assert spec["replicas"] == 3
    assert statefulset(ha["ha-etcd"])["spec"]["replicas"] == 2
    assert spec["serviceName"] == PEERS
    # Followers are never Ready: OrderedReady would never start the next replica, and a
    # RollingUpdate would stall after the first updated follower.
    assert spec["podManagementPolicy"] == "Parallel"
    assert spec["updateStrategy"] == {"type": "OnDelete"}
    assert matches(spec["selector"]["matchLabels"], labels_of(spec["template"]))
    sw = ha["ha-lease"].deployment(SUBWORKER)
    assert not matches(spec["selector"]["matchLabels"], labels_of(sw["spec"]["template"]))


@pytest.mark.parametrize(
    ("value_set", "size", "modes", "storage_class", "annotations"),
    [
        ("ha-lease", "1Gi", ["ReadWriteOnce"], None, None),
        ("ha-etcd", "5Gi", ["ReadWriteOncePod"], "fast-ssd", {"example.com/backup": "daily"}),
    ],
)
def test_each_replica_gets_a_claim_of_its_own_mounted_at_the_state_dir(
    ha: dict[str, Rendering],
    value_set: str,
    size: str,
    modes: list[str],
    storage_class: str | None,
    annotations: dict[str, str] | None,
) -> None:
    r = ha[value_set]
    [claim] = statefulset(r)["spec"]["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "state"
    assert claim["metadata"].get("annotations") == annotations
    assert claim["spec"]["accessModes"] == modes
    assert claim["spec"]["resources"]["requests"]["storage"] == size
    assert claim["spec"].get("storageClassName") == storage_class
    mounts = [m for m in container(r)["volumeMounts"] if m["mountPath"] == STATE_DIR]
    assert mounts == [{"name": "state", "mountPath": STATE_DIR}]
    # The claim template, not a pod volume, backs it.
    assert "state" not in {v["name"] for v in pod(r)["spec"]["volumes"]}
    assert f"--state-dir={STATE_DIR}" in container(r)["args"]


@pytest.mark.parametrize("ordinal", [0, 2])
def test_each_replica_advertises_its_own_stable_name_and_elects_on_the_charts_lease(
    ha: dict[str, Rendering], ordinal: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = ha["ha-lease"]
    args = parse_as_replica(r, ordinal, monkeypatch)
    pod_name = f"{NAME}-{ordinal}"
    assert args.advertise_host == f"{pod_name}.{PEERS}.{NAMESPACE}.svc"
    assert args.replica_id == pod_name
    assert not [a for a in container(r)["args"] if a.startswith("--advertise-host")]
    assert args.state_dir == STATE_DIR
    assert (args.lease_duration, args.sync_replicas, args.require_sync) == (5, 1, False)
    assert args.replication_port == REPLICATION_PORT
    assert parse_election_url(args.leader_election) == KubernetesTarget(NAMESPACE, NAME)
    assert pod(r)["spec"]["automountServiceAccountToken"] is True
    assert pod(r)["spec"]["serviceAccountName"] == NAME


def test_an_etcd_url_and_the_other_ha_values_reach_the_control_planes_parser(
    ha: dict[str, Rendering], monkeypatch: pytest.MonkeyPatch
) -> None:
    r = ha["ha-etcd"]
    args = parse_as_replica(r, 1, monkeypatch)
    target = parse_election_url(args.leader_election)
    assert isinstance(target, EtcdTarget)
    assert target.endpoints == ("etcd-0.etcd.infra.svc:2379", "etcd-1.etcd.infra.svc:2379")
    assert target.prefix == "/fastworker-jobs"
    assert (args.lease_duration, args.sync_replicas, args.require_sync) == (8, 1, True)
    # etcd needs no service account token: none is mounted.
    assert pod(r)["spec"]["automountServiceAccountToken"] is False
    # auth.enabled reaches the replicas too (they authenticate to each other with it).
    env = {e["name"]: e for e in container(r)["env"]}
    assert env["FASTWORKER_AUTH_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == "fastworker-auth"


def test_only_the_leader_is_ready_and_a_follower_is_started_and_kept_alive_by_healthz(
    ha: dict[str, Rendering],
) -> None:
    c = container(ha["ha-lease"])
    assert c["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    # A startup probe on /readyz would kill a follower once its threshold ran out.
    startup = c["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 30
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports["replication"] == REPLICATION_PORT


# --- the Services -----------------------------------------------------------------------------


@pytest.mark.parametrize("value_set", HA_IDS)
def test_the_client_service_routes_only_to_ready_control_plane_pods(
    ha: dict[str, Rendering], value_set: str
) -> None:
    r = ha[value_set]
    service = services(r)[SERVICE]
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["publishNotReadyAddresses"] is False
    assert matches(service["spec"]["selector"], labels_of(pod(r)))
    assert not matches(
        service["spec"]["selector"], labels_of(r.deployment(SUBWORKER)["spec"]["template"])
    )
    names = {p["name"] for p in container(r)["ports"]}
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= names
    assert "replication" not in {p["name"] for p in service["spec"]["ports"]}


@pytest.mark.parametrize("value_set", HA_IDS)
def test_the_headless_service_names_every_replica_ready_or_not_on_the_replication_port(
    ha: dict[str, Rendering], value_set: str
) -> None:
    r = ha[value_set]
    peers = services(r)[PEERS]
    assert peers["spec"]["clusterIP"] == "None"
    assert peers["spec"]["publishNotReadyAddresses"] is True
    assert matches(peers["spec"]["selector"], labels_of(pod(r)))
    [port] = peers["spec"]["ports"]
    assert (port["port"], port["targetPort"]) == (REPLICATION_PORT, "replication")
    # <pod>.<serviceName>.<namespace>.svc exists because the StatefulSet names this Service.
    assert statefulset(r)["spec"]["serviceName"] == PEERS
    for monitor in r.of_kind("ServiceMonitor"):  # it scrapes port http: not on this one
        assert {e["port"] for e in monitor["spec"]["endpoints"]} == {"http"}


# --- election, budget, placement ------------------------------------------------------------


def test_the_role_allows_get_and_update_of_the_charts_lease_and_nothing_else(
    ha: dict[str, Rendering],
) -> None:
    r = ha["ha-lease"]
    [lease] = r.of_kind("Lease")
    assert lease["apiVersion"] == "coordination.k8s.io/v1"
    assert lease["metadata"]["name"] == NAME
    assert lease["spec"] == {}  # no holder: the first replica to campaign takes it
    [role] = r.of_kind("Role")
    assert role["rules"] == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": [NAME],
            "verbs": ["get", "update"],
        }
    ]
    [binding] = r.of_kind("RoleBinding")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    [account] = r.of_kind("ServiceAccount")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": NAMESPACE}
    ]
    assert pod(r)["spec"]["serviceAccountName"] == account["metadata"]["name"]
    assert r.of_kind("ClusterRole") == r.of_kind("ClusterRoleBinding") == []


def test_with_an_etcd_url_no_lease_role_or_binding_is_rendered(ha: dict[str, Rendering]) -> None:
    r = ha["ha-etcd"]
    assert r.of_kind("Lease") == r.of_kind("Role") == r.of_kind("RoleBinding") == []
    [account] = r.of_kind("ServiceAccount")
    assert pod(r)["spec"]["serviceAccountName"] == account["metadata"]["name"]


@pytest.mark.parametrize("value_set", HA_IDS)
def test_the_control_plane_budget_lets_one_replica_go_at_a_time_and_followers_be_evicted(
    ha: dict[str, Rendering], value_set: str
) -> None:
    r = ha[value_set]
    budgets = {
        labels_of(b)["app.kubernetes.io/component"]: b for b in r.of_kind("PodDisruptionBudget")
    }
    pdb = budgets[CONTROL_PLANE]
    assert pdb["metadata"]["name"] == NAME
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    selector = pdb["spec"]["selector"]["matchLabels"]
    assert matches(selector, labels_of(pod(r)))
    assert not matches(selector, labels_of(r.deployment(SUBWORKER)["spec"]["template"]))


def anti_affinity_term(r: Rendering, kind: str) -> dict[str, Any]:
    [term] = pod(r)["spec"]["affinity"]["podAntiAffinity"][kind]
    found: dict[str, Any] = term
    return found


def test_replicas_prefer_different_nodes_by_default(ha: dict[str, Rendering]) -> None:
    r = ha["ha-lease"]
    term = anti_affinity_term(r, "preferredDuringSchedulingIgnoredDuringExecution")
    assert term["weight"] == 100
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert matches(term["podAffinityTerm"]["labelSelector"]["matchLabels"], labels_of(pod(r)))
    assert set(pod(r)["spec"]["affinity"]) == {"podAntiAffinity"}


def test_required_anti_affinity_keeps_the_users_other_affinity(ha: dict[str, Rendering]) -> None:
    r = ha["ha-etcd"]
    term = anti_affinity_term(r, "requiredDuringSchedulingIgnoredDuringExecution")
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert matches(term["labelSelector"]["matchLabels"], labels_of(pod(r)))
    node = HA_SETS[1].values["controlPlane"]["affinity"]["nodeAffinity"]
    assert pod(r)["spec"]["affinity"]["nodeAffinity"] == node


def test_a_pod_anti_affinity_of_the_users_replaces_the_charts() -> None:
    own = {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 10,
                "podAffinityTerm": {
                    "topologyKey": "topology.kubernetes.io/zone",
                    "labelSelector": {
                        "matchLabels": {"app.kubernetes.io/component": "control-plane"}
                    },
                },
            }
        ]
    }
    values = {"controlPlane": {"replicas": 2, "affinity": {"podAntiAffinity": own}}}
    r = build(ValueSet("own-anti-affinity", values, frozenset()))
    assert pod(r)["spec"]["affinity"] == {"podAntiAffinity": own}


def test_the_network_policy_admits_replication_from_the_other_replicas_only(
    ha: dict[str, Rendering],
) -> None:
    r = ha["ha-etcd"]
    policy = next(
        p
        for p in r.of_kind("NetworkPolicy")
        if labels_of(p)["app.kubernetes.io/component"] == CONTROL_PLANE
    )
    rules = [
        rule
        for rule in policy["spec"]["ingress"]
        if {"port": REPLICATION_PORT, "protocol": "TCP"} in rule["ports"]
    ]
    assert len(rules) == 1
    [peer] = rules[0]["from"]
    assert matches(peer["podSelector"]["matchLabels"], labels_of(pod(r)))
    assert not matches(
        peer["podSelector"]["matchLabels"], labels_of(r.deployment(SUBWORKER)["spec"]["template"])
    )
    assert rules[0]["ports"] == [{"port": REPLICATION_PORT, "protocol": "TCP"}]


def test_subworkers_still_find_the_leader_through_the_client_service(
    ha: dict[str, Rendering],
) -> None:
    args = ha["ha-lease"].container(SUBWORKER)["args"]
    assert f"--discovery-address=tcp://{SERVICE}.{NAMESPACE}.svc:5550" in args


def test_the_install_notes_say_who_leads_where_the_state_is_and_how_to_upgrade(
    ha: dict[str, Rendering],
) -> None:
    notes = ha["ha-lease"].notes
    assert f"Control-plane replicas: 3 (StatefulSet {NAME})" in notes
    assert f"kubectl get lease {NAME} --namespace {NAMESPACE}" in notes
    assert f"state-{NAME}-<ordinal>" in notes
    assert "OnDelete" in notes
    assert "kubectl get lease" not in ha["ha-etcd"].notes
    assert "Control-plane replicas" not in build(ValueSet("one", {}, frozenset())).notes
