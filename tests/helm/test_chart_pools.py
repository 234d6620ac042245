"""Worker pools (subworker.pools): a Deployment, PodDisruptionBudget and scaler per pool,
kept apart by a pool label, each pool serving and scaling on its own queues; and the one
pool of old, unchanged, when no pools are given.

The every-pool checks (security, probes, drain, labels, lint, kubernetes-validate) run in
test_chart*.py on the "pools" value set of chart_render, one pool at a time (pool_view);
the pools' KEDA queries in test_chart_pools_keda.py.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
from typing import Any

import helm_python
import pytest
import yaml
from chart_render import (
    CHART_DIR,
    CONTROL_PLANE,
    FULLNAME,
    NAMESPACE,
    POOL_LABEL,
    POOLS,
    SERVICE,
    SUBWORKER,
    Rendering,
    ValueSet,
    arg_value,
    build,
    labels_of,
    matches,
    render,
    with_pools,
)
from helm_python.errors import HelmRenderError, HelmValuesError

OLD_SELECTOR = {
    "app.kubernetes.io/name": "fastworker",
    "app.kubernetes.io/instance": "fw",
    "app.kubernetes.io/component": SUBWORKER,
}


def pods_of(deployment: dict[str, Any]) -> dict[str, Any]:
    pod: dict[str, Any] = deployment["spec"]["template"]
    return pod


def container_of(deployment: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any]
    [container] = pods_of(deployment)["spec"]["containers"]
    return container


def env_of(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}


# --- no pools: the one Deployment of old ----------------------------------------------------


@pytest.mark.parametrize("value_set", ["default", "hpa", "keda-and-monitors", "everything-off"])
def test_without_pools_one_subworker_deployment_keeps_its_name_and_selector(
    value_set: str, renderings: dict[str, Rendering]
) -> None:
    # An upgrade applies to the same objects: a Deployment's selector cannot change.
    r = renderings[value_set]
    [deployment] = r.by_pool("Deployment").values()
    assert deployment["metadata"]["name"] == f"{FULLNAME}-subworker"
    assert deployment["spec"]["selector"]["matchLabels"] == OLD_SELECTOR
    assert POOL_LABEL not in labels_of(pods_of(deployment))
    assert not [a for a in container_of(deployment)["args"] if a.startswith("--queues")]
    for kind in ("PodDisruptionBudget", "HorizontalPodAutoscaler", "ScaledObject"):
        for obj in r.of_kind(kind):
            assert obj["metadata"]["name"] == f"{FULLNAME}-subworker", kind
            assert POOL_LABEL not in labels_of(obj)
    for pdb in r.of_kind("PodDisruptionBudget"):
        assert pdb["spec"]["selector"]["matchLabels"] == OLD_SELECTOR


def test_the_one_pool_of_old_can_name_its_queues_too(renderings: dict[str, Rendering]) -> None:
    r = build(
        ValueSet(
            "old-queues",
            {"subworker": {"queues": ["reports", "default:4"], "keda": {"enabled": True}}},
            frozenset(),
        )
    )
    [deployment] = r.by_pool("Deployment").values()
    assert deployment["metadata"]["name"] == f"{FULLNAME}-subworker"
    assert deployment["spec"]["selector"]["matchLabels"] == OLD_SELECTOR
    assert arg_value(container_of(deployment), "--queues") == "reports,default:4"
    [scaled] = r.of_kind("ScaledObject")
    assert 'queue=~"reports|default"' in scaled["spec"]["triggers"][0]["metadata"]["query"]
    # Without queues the default query is the whole release's depth, as before.
    [before] = renderings["keda-and-monitors"].of_kind("ScaledObject")
    assert before["spec"]["triggers"][0]["metadata"]["query"] == (
        f'sum(fastworker_queue_depth{{namespace="{NAMESPACE}",service="{SERVICE}"}})'
    )


# --- two pools ----------------------------------------------------------------------------------


def test_two_pools_render_two_deployments_each_selecting_only_its_own_pods(
    renderings: dict[str, Rendering],
) -> None:
    r = renderings["pools"]
    deployments = r.by_pool("Deployment")
    assert set(deployments) == set(POOLS)
    control_plane = labels_of(pods_of(r.deployment(CONTROL_PLANE)))
    for pool, deployment in deployments.items():
        assert deployment["metadata"]["name"] == f"{FULLNAME}-subworker-{pool}"
        assert labels_of(deployment)[POOL_LABEL] == pool
        selector = deployment["spec"]["selector"]["matchLabels"]
        assert selector == {**OLD_SELECTOR, POOL_LABEL: pool}
        for other, pods in ((p, labels_of(pods_of(d))) for p, d in deployments.items()):
            assert matches(selector, pods) == (other == pool), (pool, other)
        assert not matches(selector, control_plane)
        # Each pool spreads its own pods over nodes, not the pools' pods together.
        [spread] = pods_of(deployment)["spec"]["topologySpreadConstraints"]
        assert spread["labelSelector"]["matchLabels"] == selector


def test_two_pools_render_two_disruption_budgets_each_for_its_own_pool(
    renderings: dict[str, Rendering],
) -> None:
    r = renderings["pools"]
    budgets, deployments = r.by_pool("PodDisruptionBudget"), r.by_pool("Deployment")
    assert set(budgets) == set(POOLS)
    for pool, pdb in budgets.items():
        assert pdb["metadata"]["name"] == f"{FULLNAME}-subworker-{pool}"
        assert pdb["spec"]["maxUnavailable"] == 1
        for other, deployment in deployments.items():
            pods = labels_of(pods_of(deployment))
            assert matches(pdb["spec"]["selector"]["matchLabels"], pods) == (other == pool)


def test_each_pool_passes_its_queues_weights_and_all_to_its_subworkers(
    renderings: dict[str, Rendering],
) -> None:
    deployments = renderings["pools"].by_pool("Deployment")
    assert arg_value(container_of(deployments["default"]), "--queues") == "default"
    assert arg_value(container_of(deployments["reports"]), "--queues") == "reports:1,exports.v2:3"


def test_the_hpa_of_a_pool_scales_that_pools_deployment_only(
    renderings: dict[str, Rendering],
) -> None:
    r = renderings["pools"]
    assert set(r.by_pool("HorizontalPodAutoscaler")) == {"default"}  # reports has KEDA
    both = with_pools(
        fast={"queues": ["fast"], "autoscaling": {"enabled": True, "maxReplicas": 4}},
        slow={"queues": ["slow"], "autoscaling": {"enabled": True, "minReplicas": 1}},
    )
    hpas = both.by_pool("HorizontalPodAutoscaler")
    assert set(hpas) == {"fast", "slow"}
    for pool, hpa in hpas.items():
        target = hpa["spec"]["scaleTargetRef"]
        assert target == {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": f"{FULLNAME}-subworker-{pool}",
        }
        assert "replicas" not in both.by_pool("Deployment")[pool]["spec"]
    assert (hpas["fast"]["spec"]["minReplicas"], hpas["fast"]["spec"]["maxReplicas"]) == (2, 4)
    assert (hpas["slow"]["spec"]["minReplicas"], hpas["slow"]["spec"]["maxReplicas"]) == (1, 10)


def test_settings_of_a_pool_land_in_that_pools_pods_and_no_other(
    renderings: dict[str, Rendering],
) -> None:
    deployments = renderings["pools"].by_pool("Deployment")
    reports, default = deployments["reports"], deployments["default"]
    spec, container = pods_of(reports)["spec"], container_of(reports)
    assert spec["nodeSelector"] == {"example.com/pool": "reports"}
    assert spec["tolerations"][0]["value"] == "reports"
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["ssd"]
    assert container["image"] == "acme/reports-worker:3.1.0"
    assert container["resources"] == {
        "requests": {"cpu": "2", "memory": "4Gi"},
        "limits": {"memory": "8Gi"},
    }
    assert arg_value(container, "--concurrency") == "2"
    assert arg_value(container, "--shutdown-timeout") == "300"
    assert spec["terminationGracePeriodSeconds"] == 315
    # Its own task modules win over the ConfigMap's list (envFrom): the env entry is later.
    env = env_of(container)
    assert env["FASTWORKER_TASK_MODULES"] == "fastworker.diagnostics acme.reports"
    assert env["REPORTS_BUCKET"] == "s3://reports"
    assert labels_of(pods_of(reports))["example.com/tier"] == "batch"

    # The other pool has none of it: the chart's subworker defaults.
    spec, container = pods_of(default)["spec"], container_of(default)
    assert {"nodeSelector", "tolerations", "affinity"}.isdisjoint(spec)
    assert container["image"] == "fastworker-subworker:0.1.0"
    assert container["resources"] == {
        "requests": {"cpu": "500m", "memory": "256Mi"},
        "limits": {"memory": "1Gi"},
    }
    assert not [a for a in container["args"] if a.startswith("--concurrency")]
    assert env_of(container) == {}
    assert "example.com/tier" not in labels_of(pods_of(default))


def test_what_a_pool_leaves_unset_comes_from_the_subworker_values() -> None:
    shared = {
        "replicas": 4,
        "concurrency": 3,
        "image": {"tag": "9.9.9"},
        "nodeSelector": {"example.com/kind": "worker"},
        "tolerations": [{"key": "workers", "operator": "Exists"}],
        "extraArgs": ["--log-format=json"],
        "extraEnv": [{"name": "SHARED", "value": "yes"}],
        "podDisruptionBudget": {"maxUnavailable": 2},
        "resources": {"limits": {"cpu": "4"}},
    }
    own = {
        "queues": ["b"],
        "replicas": 1,
        "image": {"repository": "acme/b"},
        "nodeSelector": {"example.com/disk": "ssd"},
        "resources": {"limits": {"memory": None}},
        "extraEnv": [{"name": "OWN", "value": "yes"}],
    }
    r = build(
        ValueSet(
            "pools-inherit",
            {"subworker": {**shared, "pools": {"a": {"queues": ["a"]}, "b": own}}},
            frozenset(),
        )
    )
    deployments = r.by_pool("Deployment")
    a, b = deployments["a"], deployments["b"]
    assert a["spec"]["replicas"] == 4
    assert b["spec"]["replicas"] == 1
    assert container_of(a)["image"] == "fastworker-subworker:9.9.9"
    assert container_of(b)["image"] == "acme/b:9.9.9"  # the repository its own, the tag not
    for deployment in (a, b):
        assert arg_value(container_of(deployment), "--concurrency") == "3"
        assert "--log-format=json" in container_of(deployment)["args"]
        assert pods_of(deployment)["spec"]["tolerations"] == shared["tolerations"]
    # Maps merge key by key, null drops a key; lists replace.
    assert pods_of(a)["spec"]["nodeSelector"] == {"example.com/kind": "worker"}
    assert pods_of(b)["spec"]["nodeSelector"] == {
        "example.com/kind": "worker",
        "example.com/disk": "ssd",
    }
    assert container_of(a)["resources"]["limits"] == {"cpu": "4", "memory": "1Gi"}
    assert container_of(b)["resources"]["limits"] == {"cpu": "4"}
    assert env_of(container_of(a)) == {"SHARED": "yes"}
    assert env_of(container_of(b)) == {"OWN": "yes"}
    assert {p["spec"]["maxUnavailable"] for p in r.by_pool("PodDisruptionBudget").values()} == {2}


def test_a_pool_can_switch_off_what_the_subworker_values_switch_on() -> None:
    # false and 0 are settings, not "unset" (a plain merge would lose them).
    r = build(
        ValueSet(
            "pools-off",
            {
                "subworker": {
                    "autoscaling": {"enabled": True},
                    "pools": {
                        "busy": {"queues": ["busy"]},
                        "idle": {
                            "queues": ["idle"],
                            "replicas": 0,
                            "autoscaling": {"enabled": False},
                            "podDisruptionBudget": {"enabled": False},
                        },
                    },
                }
            },
            frozenset(),
        )
    )
    assert set(r.by_pool("HorizontalPodAutoscaler")) == {"busy"}
    assert set(r.by_pool("PodDisruptionBudget")) == {"busy"}
    assert r.by_pool("Deployment")["idle"]["spec"]["replicas"] == 0


# --- the pools together -----------------------------------------------------------------------


def test_the_pod_monitor_and_the_subworker_network_policy_cover_every_pool(
    renderings: dict[str, Rendering],
) -> None:
    r = renderings["pools"]
    [monitor] = r.of_kind("PodMonitor")
    [policy] = [
        p for p in r.of_kind("NetworkPolicy") if p["metadata"]["name"].endswith("-subworker")
    ]
    for pool, deployment in r.by_pool("Deployment").items():
        pods = labels_of(pods_of(deployment))
        assert matches(monitor["spec"]["selector"]["matchLabels"], pods), pool
        assert matches(policy["spec"]["podSelector"]["matchLabels"], pods), pool


def test_the_notes_list_each_pool_with_its_queues_and_how_to_scale_one(
    renderings: dict[str, Rendering],
) -> None:
    notes = renderings["pools"].notes
    assert (
        f"Pool default ({FULLNAME}-subworker-default): autoscaled on CPU, 3..7; queues default\n"
        in notes
    )
    assert (
        f"Pool reports ({FULLNAME}-subworker-reports): scaled by KEDA on its queues' depth, "
        "0..12; queues reports:1,exports.v2:3\n"
    ) in notes
    assert "--set subworker.pools.<pool>.replicas=N" in notes
    assert "Warning" not in notes


def test_the_notes_warn_when_no_pool_serves_the_default_queue() -> None:
    notes = with_pools(reports={"queues": ["reports"]}).notes
    assert 'no pool serves the queue "default"' in notes
    assert "fastworker.echo" in notes
    # A pool without queues serves every queue its modules name, the default one included.
    assert "Warning" not in with_pools(reports={"queues": ["reports"]}, rest={}).notes


def test_the_subworker_parser_reads_each_pools_rendered_arguments(
    renderings: dict[str, Rendering], monkeypatch: pytest.MonkeyPatch
) -> None:
    from fastworker_subworker.cli import configure_parser

    for key in [k for k in os.environ if k.startswith("FASTWORKER_")]:
        monkeypatch.delenv(key)  # the parser's defaults come from these: none may leak in

    known = {
        s for a in configure_parser(argparse.ArgumentParser())._actions for s in a.option_strings
    }
    if "--queues" not in known:
        pytest.skip("this subworker has no --queues option yet (issue 17)")
    r = renderings["pools"]
    for pool, deployment in r.by_pool("Deployment").items():
        container = container_of(deployment)
        with monkeypatch.context() as env:
            for key, value in {**r.one("ConfigMap")["data"], **env_of(container)}.items():
                env.setenv(key, value)
            parser = configure_parser(argparse.ArgumentParser())
        args = parser.parse_args(container["args"])
        rendered = arg_value(container, "--queues")
        for name in re.findall(r"[A-Za-z0-9_.-]+(?=:|,|$)", rendered):
            assert name in json.dumps(vars(args), default=str), (pool, name, vars(args))


# --- refusals -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        pytest.param(
            {
                "subworker": {
                    "keda": {"enabled": True},
                    "pools": {"a": {"autoscaling": {"enabled": True}}},
                }
            },
            "subworker.pools.a.autoscaling.enabled and subworker.pools.a.keda.enabled"
            " cannot both be true",
            id="hpa-in-a-pool-keda-inherited",
        ),
        pytest.param(
            {
                "subworker": {
                    "pools": {
                        "a": {
                            "autoscaling": {"enabled": True},
                            "resources": {"requests": {"cpu": None}},
                        }
                    }
                }
            },
            "subworker.pools.a.autoscaling.enabled needs subworker.pools.a.resources.requests.cpu",
            id="hpa-in-a-pool-without-a-cpu-request",
        ),
        pytest.param(
            {"subworker": {"pools": {"a" * 40: {}}}},
            f"subworker.pools.{'a' * 40}: its objects would be named",
            id="name-over-63-characters",
        ),
    ],
)
def test_pools_the_chart_cannot_render_are_refused_with_a_clear_message(
    settings: dict[str, Any], message: str
) -> None:
    with pytest.raises((HelmRenderError, HelmValuesError), match=re.escape(message)):
        render(settings)


@pytest.mark.parametrize(
    ("pools_value", "path", "problem"),
    [
        pytest.param(
            {"Reports": {}}, "at '/subworker/pools'", "does not match pattern", id="uppercase"
        ),
        pytest.param(
            {"batch_jobs": {}}, "at '/subworker/pools'", "does not match pattern", id="underscore"
        ),
        pytest.param(
            {"-x": {}}, "at '/subworker/pools'", "does not match pattern", id="leading-dash"
        ),
        pytest.param(
            {"a": {"queues": ["two words"]}},
            "at '/subworker/pools/a/queues/0'",
            "does not match pattern",
            id="queue-with-a-space",
        ),
        pytest.param(
            {"a": {"queues": ["reports:0"]}},
            "at '/subworker/pools/a/queues/0'",
            "does not match pattern",
            id="weight-0",
        ),
        pytest.param(
            {"a": {"queues": ["reports:1001"]}},
            "at '/subworker/pools/a/queues/0'",
            "does not match pattern",
            id="weight-1001",
        ),
        pytest.param(
            {"a": {"metricsPort": 9200}},
            "at '/subworker/pools/a'",
            "not allowed",
            id="metrics-port-is-shared",
        ),
        pytest.param(
            {"a": {"replicas": -1}}, "at '/subworker/pools/a/replicas'", "minimum", id="replicas"
        ),
        pytest.param(
            {"a": {"autoscaling": {"enabled": True}, "keda": {"enabled": True}}},
            "at '/subworker/pools/a/keda/enabled'",
            "must be false",
            id="hpa-and-keda-in-one-pool",
        ),
        pytest.param(
            {"a": {"taskModules": ["not a module"]}},
            "at '/subworker/pools/a/taskModules/0'",
            "does not match pattern",
            id="task-module",
        ),
    ],
)
def test_the_schema_rejects_bad_pools_naming_the_offending_path(
    pools_value: dict[str, Any], path: str, problem: str
) -> None:
    values = {"subworker": {"pools": pools_value}}
    with pytest.raises(HelmValuesError) as caught:
        helm_python.Chart.load(CHART_DIR).validate_schema(copy.deepcopy(values))
    assert path in str(caught.value)
    assert problem in str(caught.value)


def test_the_example_in_values_yaml_renders_the_pools_it_describes() -> None:
    text = (CHART_DIR / "values.yaml").read_text()
    block = text[text.index("  #   pools:\n") :].split("\n  # {}")[0]
    example = yaml.safe_load("\n".join(line.removeprefix("  #   ") for line in block.splitlines()))
    r = build(ValueSet("values-example", {"subworker": example}, frozenset()))
    assert set(r.by_pool("Deployment")) == set(example["pools"]) == {"default", "reports"}
    assert set(r.by_pool("ScaledObject")) == {"reports"}
