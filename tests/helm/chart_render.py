"""Rendering the Helm chart (deploy/helm/fastworker) with real Helm (v4, in process through
helm-python-sdk) for named value sets, and reading the objects back: shared by the chart's
tests."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import helm_python
import kubernetes_validate  # type: ignore[import-untyped]
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART_DIR = ROOT / "deploy" / "helm" / "fastworker"
CHART_META: dict[str, Any] = yaml.safe_load((CHART_DIR / "Chart.yaml").read_text())
APP_VERSION = str(CHART_META["appVersion"])

RELEASE, NAMESPACE = "fw", "jobs"
FULLNAME = f"{RELEASE}-fastworker"
SERVICE = f"{FULLNAME}-control-plane"
SERVICE_HOST = f"{SERVICE}.{NAMESPACE}.svc"
CONTROL_PLANE, SUBWORKER = "control-plane", "subworker"
# The label that keeps subworker pools apart (subworker.pools); the one pool of old has none.
POOL_LABEL = "fastworker.io/pool"

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
# On by default (controlPlane.persistence): the control plane's state claim.
PVC = "control-plane-pvc.yaml"

VALUE_SETS = [
    ValueSet("default", {}, ALWAYS | {PVC, "subworker-pdb.yaml", "tests/test-submit.yaml"}),
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
        ALWAYS | {PVC, "subworker-hpa.yaml", "subworker-pdb.yaml", "tests/test-submit.yaml"},
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
        ALWAYS | {PVC, "subworker-pdb.yaml", "tests/test-submit.yaml"},
    ),
    ValueSet(
        "everything-off",
        {
            "tests": {"enabled": False},
            "controlPlane": {"persistence": {"enabled": False}},
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
            PVC,
            "subworker-scaledobject.yaml",
            "servicemonitor.yaml",
            "podmonitor.yaml",
            "subworker-pdb.yaml",
            "tests/test-submit.yaml",
        },
    ),
]
VALUE_SETS.append(
    ValueSet(
        "auth",
        {
            "auth": {"enabled": True, "token": "a-test-token"},
            "telemetry": {"serviceMonitor": {"enabled": True}, "podMonitor": {"enabled": True}},
        },
        ALWAYS
        | {
            PVC,
            "auth-secret.yaml",
            "servicemonitor.yaml",
            "podmonitor.yaml",
            "subworker-pdb.yaml",
            "tests/test-submit.yaml",
        },
    )
)
VALUE_SETS += [
    ValueSet(
        "persistence-options",
        {
            "controlPlane": {
                "persistence": {
                    "size": "20Gi",
                    "storageClass": "-",
                    "accessModes": ["ReadWriteOncePod"],
                    "annotations": {"example.com/backup": "daily"},
                }
            }
        },
        ALWAYS | {PVC, "subworker-pdb.yaml", "tests/test-submit.yaml"},
    ),
    ValueSet(
        "existing-claim",
        {"controlPlane": {"persistence": {"existingClaim": "fastworker-journal"}}},
        ALWAYS | {"subworker-pdb.yaml", "tests/test-submit.yaml"},
    ),
    # TLS on the NNG sockets from a Secret of the user's (the chart renders none).
    ValueSet(
        "tls",
        {"tls": {"enabled": True, "existingSecret": f"{FULLNAME}-tls"}},
        ALWAYS | {PVC, "subworker-pdb.yaml", "tests/test-submit.yaml"},
    ),
]
# NetworkPolicies with sources of each kind, and subworkers spread over zones as a rule.
NETWORK_POLICY = "networkpolicy.yaml"
VALUE_SETS.append(
    ValueSet(
        "network-policy",
        {
            "networkPolicy": {
                "enabled": True,
                "allowFrom": [
                    {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "shop"}}},
                    {"podSelector": {"matchLabels": {"app": "api"}}},
                ],
                "httpAllowFrom": [
                    {
                        "namespaceSelector": {
                            "matchLabels": {"kubernetes.io/metadata.name": "monitoring"}
                        }
                    },
                    {"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}},
                ],
            },
            "subworker": {
                "topologySpreadConstraints": [
                    {
                        "maxSkew": 2,
                        "topologyKey": "topology.kubernetes.io/zone",
                        "whenUnsatisfiable": "DoNotSchedule",
                    }
                ]
            },
        },
        ALWAYS | {PVC, NETWORK_POLICY, "subworker-pdb.yaml", "tests/test-submit.yaml"},
    )
)
# Two worker pools (subworker.pools): "default" autoscaled on CPU with what it leaves unset
# taken from subworker.*, "reports" with its own queues (a dotted one among them), image,
# task modules, process pool, resources, scheduling and a KEDA ScaledObject; the PodMonitor
# and the NetworkPolicies cover both.
POOLS = ("default", "reports")
VALUE_SETS.append(
    ValueSet(
        "pools",
        {
            "subworker": {
                "pools": {
                    "default": {
                        "queues": ["default"],
                        "autoscaling": {"enabled": True, "minReplicas": 3, "maxReplicas": 7},
                    },
                    "reports": {
                        "queues": ["reports:1", "exports.v2:3"],
                        "image": {"repository": "acme/reports-worker", "tag": "3.1.0"},
                        "taskModules": ["fastworker.diagnostics", "acme.reports"],
                        "concurrency": 2,
                        "processes": 4,
                        "maxTasksPerChild": 500,
                        "maxMemoryPerChild": 1536,  # x 4 processes: under the 8Gi limit
                        "shutdownTimeout": 300,
                        "resources": {
                            "requests": {"cpu": "2", "memory": "4Gi"},
                            "limits": {"memory": "8Gi"},
                        },
                        "nodeSelector": {"example.com/pool": "reports"},
                        "tolerations": [
                            {
                                "key": "dedicated",
                                "operator": "Equal",
                                "value": "reports",
                                "effect": "NoSchedule",
                            }
                        ],
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
                        "podLabels": {"example.com/tier": "batch"},
                        "extraEnv": [{"name": "REPORTS_BUCKET", "value": "s3://reports"}],
                        "keda": {"enabled": True, "minReplicaCount": 0, "maxReplicaCount": 12},
                    },
                }
            },
            "telemetry": {"podMonitor": {"enabled": True}},
            "networkPolicy": {"enabled": True},
        },
        ALWAYS
        | {
            PVC,
            NETWORK_POLICY,
            "subworker-hpa.yaml",
            "subworker-pdb.yaml",
            "subworker-scaledobject.yaml",
            "podmonitor.yaml",
            "tests/test-submit.yaml",
        },
    )
)
BY_ID = {v.id: v for v in VALUE_SETS}
IDS = [v.id for v in VALUE_SETS]


def views(value_sets: list[ValueSet]) -> dict[str, tuple[str, str | None]]:
    """What the tests that take one `rendering` run on, by test id: (value set, pool). Each
    value set, or with subworker.pools each of its pools on its own (Rendering.pool_view)."""
    found: dict[str, tuple[str, str | None]] = {}
    for v in value_sets:
        pools = sorted(v.values.get("subworker", {}).get("pools") or {})
        found |= {f"{v.id}-{pool}": (v.id, pool) for pool in pools} or {v.id: (v.id, None)}
    return found


VIEWS = views(VALUE_SETS)
VIEW_IDS = list(VIEWS)


def merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """``extra`` merged into a copy of ``base``, maps key by key (as Helm coalesces values)."""
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def merged(overrides: dict[str, Any]) -> dict[str, Any]:
    """The chart's values.yaml with ``overrides`` merged in (as Helm coalesces them)."""
    return merge(yaml.safe_load((CHART_DIR / "values.yaml").read_text()), overrides)


def overlay(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` laid on a copy of ``base`` as the chart does for a pool: maps merge key by
    key, anything else replaces, ``None`` drops the key."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = overlay(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def pool_values(values: dict[str, Any], pool: str) -> dict[str, Any]:
    """The subworker settings one pool runs with: subworker.* (less the pools), its own
    laid on top; keda.query is never inherited."""
    subworker = values["subworker"]
    base = {k: v for k, v in subworker.items() if k != "pools"}
    base["keda"] = {**base["keda"], "query": ""}
    return overlay(base, subworker["pools"][pool] or {})


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
    pool: str | None = None  # a pool_view: only this pool's subworker objects

    def pool_view(self, pool: str) -> Rendering:
        """This rendering as if ``pool`` were its only subworker pool: the other pools'
        objects left out, and values["subworker"] the settings the pool runs with."""
        objects = [(p, o) for p, o in self.objects if labels_of(o).get(POOL_LABEL) in (None, pool)]
        values = {**self.values, "subworker": pool_values(self.values, pool)}
        return Rendering(self.value_set, values, self.manifests, objects, self.notes, pool)

    def by_pool(self, kind: str) -> dict[str | None, dict[str, Any]]:
        """The subworker objects of one kind, by their pool label (None: the one pool of
        old, without subworker.pools)."""
        found = [o for o in self.of_kind(kind) if component_of(o) == SUBWORKER]
        keyed = {labels_of(o).get(POOL_LABEL): o for o in found}
        assert len(keyed) == len(found), f"two {kind}s of one pool"
        return keyed

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
        container: dict[str, Any]
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


def component_of(obj: dict[str, Any]) -> str | None:
    return labels_of(obj).get("app.kubernetes.io/component")


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


def with_pools(**pools: Any) -> Rendering:
    """The chart rendered with these subworker pools, the defaults for everything else."""
    return build(ValueSet("pools-custom", {"subworker": {"pools": pools}}, frozenset()))


def nng_scheme(r: Rendering) -> str:
    """The scheme every NNG address of this rendering must have."""
    return "tls+tcp://" if r.values["tls"]["enabled"] else "tcp://"


def arg_value(container: dict[str, Any], flag: str) -> str:
    values: list[str] = [a.split("=", 1)[1] for a in container["args"] if a.startswith(f"{flag}=")]
    assert len(values) == 1, f"{flag}= given {len(values)} times in {container['args']}"
    return values[0]
