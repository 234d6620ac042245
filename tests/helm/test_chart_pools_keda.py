"""KEDA on worker pools: each pool's ScaledObject scales its own Deployment on the depth of
its own queues, and Prometheus' own engine (`promtool test rules`, no server, no cluster)
evaluates the rendered query to the sum of exactly those queues."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from chart_render import (
    FULLNAME,
    NAMESPACE,
    SERVICE,
    Rendering,
    ValueSet,
    build,
    with_pools,
)


def query_of(scaled: dict[str, Any]) -> str:
    [trigger] = scaled["spec"]["triggers"]
    assert trigger["type"] == "prometheus"
    query: str = trigger["metadata"]["query"]
    return query


def test_each_pools_scaled_object_queries_only_its_own_queues(
    renderings: dict[str, Rendering],
) -> None:
    [(pool, scaled)] = renderings["pools"].by_pool("ScaledObject").items()
    assert pool == "reports"
    assert scaled["spec"]["scaleTargetRef"] == {"name": f"{FULLNAME}-subworker-reports"}
    # Weights stripped; the dot escaped for the regular expression, and its backslash for
    # the PromQL string.
    assert query_of(scaled) == (
        f'sum(fastworker_queue_depth{{namespace="{NAMESPACE}",service="{SERVICE}",'
        'queue=~"reports|exports\\\\.v2"})'
    )


def test_two_keda_pools_each_count_their_own_queues_and_a_query_of_ones_own_is_kept() -> None:
    r = build(
        ValueSet(
            "pools-keda",
            {
                "subworker": {
                    "keda": {"enabled": True, "query": "sum(shared_query)"},
                    "pools": {
                        "fast": {"queues": ["fast", "default:4"]},
                        "slow": {"queues": ["slow"], "keda": {"threshold": "5"}},
                        "mine": {"queues": ["mine"], "keda": {"query": "sum(my_query)"}},
                        "all": {},
                    },
                }
            },
            frozenset(),
        )
    )
    scaled = r.by_pool("ScaledObject")
    selector = f'namespace="{NAMESPACE}",service="{SERVICE}"'
    # The shared subworker.keda.query cannot know a pool's queues: no pool inherits it.
    assert {pool: query_of(s) for pool, s in scaled.items()} == {
        "fast": f'sum(fastworker_queue_depth{{{selector},queue=~"fast|default"}})',
        "slow": f'sum(fastworker_queue_depth{{{selector},queue=~"slow"}})',
        "mine": "sum(my_query)",
        "all": f"sum(fastworker_queue_depth{{{selector}}})",  # it serves every queue
    }
    assert scaled["slow"]["spec"]["triggers"][0]["metadata"]["threshold"] == "5"
    assert scaled["fast"]["spec"]["triggers"][0]["metadata"]["threshold"] == "50"
    for pool, s in scaled.items():
        assert s["spec"]["scaleTargetRef"]["name"] == f"{FULLNAME}-subworker-{pool}"


PROMTOOL = shutil.which("promtool")


@pytest.mark.skipif(PROMTOOL is None, reason="needs promtool (Debian's prometheus package)")
def test_prometheus_evaluates_each_pools_query_to_the_depth_of_its_own_queues_only(
    renderings: dict[str, Rendering], tmp_path: Path
) -> None:
    # Given the depth series a ServiceMonitor scrape would give (queue and priority labels,
    # namespace and service attached), with names the regex must not confuse: a dot that is
    # not a wildcard, a queue whose name a pool's name is a prefix of, another release.
    series = {
        ("reports", "normal", SERVICE): 7,
        ("reports", "high", SERVICE): 1,
        ("exports.v2", "normal", SERVICE): 3,
        ("exportsXv2", "normal", SERVICE): 100,
        ("reports-old", "normal", SERVICE): 200,
        ("default", "normal", SERVICE): 40,
        ("reports", "normal", "other-fastworker-control-plane"): 1000,
    }
    scaled = renderings["pools"].by_pool("ScaledObject")["reports"]
    both = with_pools(a={"queues": ["default"], "keda": {"enabled": True}})
    [default_query] = [query_of(s) for s in both.by_pool("ScaledObject").values()]
    tests = {
        "rule_files": [],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {
                        "series": (
                            f'fastworker_queue_depth{{namespace="{NAMESPACE}",service="{svc}",'
                            f'queue="{queue}",priority="{priority}"}}'
                        ),
                        "values": f"{depth}x2",
                    }
                    for (queue, priority, svc), depth in series.items()
                ],
                "promql_expr_test": [
                    # When KEDA evaluates each pool's query, then it gets its queues' sum.
                    {"expr": query_of(scaled), "eval_time": "1m", "exp_samples": [{"value": 11}]},
                    {"expr": default_query, "eval_time": "1m", "exp_samples": [{"value": 40}]},
                ],
            }
        ],
    }
    file = tmp_path / "queries_test.yaml"
    file.write_text(yaml.safe_dump(tests))
    done = subprocess.run(
        [str(PROMTOOL), "test", "rules", str(file)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout
