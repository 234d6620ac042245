"""The ``ha`` scenario (issue 20): what replicating the control plane costs.

It runs the ``latency``, ``pipelined`` and ``batch`` workloads, unchanged, on the durable
single control plane (``cp+1sw+journal``) and on its replicated form (``cp-ha``: etcd,
two control planes, one subworker; ``bench/ha_cluster.py``). Both clusters are started
first and every repeat measures each workload on both, one right after the other, the
order rotating each repeat (``cpu_scenario.turns``): this VM's speed drifts within
seconds, so only figures measured side by side compare. The paired figures divide (for
tasks/s) or subtract (for latency) the two topologies' values of the same repeat; their
median is the median of those ratios or differences, not the ratio of the medians.
Keys: ``ha.batch.tasks_per_s.cp-ha``, ``ha.batch.tasks_per_s.ratio``,
``ha.latency.p50_ms.added``, and ``ha.batch.unreplicated_s.cp-ha``: the seconds of each
repeat during which the leader acknowledged without its follower (it goes on alone when
the follower falls more than 2 s behind), so a figure helped by that shows as such.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from bench.config import DURABLE, HA_TOPOLOGIES, REPLICATED
from bench.scenarios import SCENARIOS, Scenario
from bench.stats import summarize

NAME = "ha"
# cp-ha also reports how long its leader acknowledged alone during each repeat
UNREPLICATED = {"unreplicated_s": "s"}
WORKLOADS: tuple[Scenario, ...] = tuple(
    replace(
        SCENARIOS[w],
        name=f"{NAME}.{w}",
        units={**SCENARIOS[w].units, **UNREPLICATED},
        topologies=HA_TOPOLOGIES,
    )
    for w in ("latency", "pipelined", "batch")
)
# metric -> how the replicated figure is set beside the durable one of the same repeat
RATIOS = ("pipelined.tasks_per_s", "batch.tasks_per_s")  # cp-ha / cp+1sw+journal
ADDED = ("latency.p50_ms", "latency.p99_ms")  # cp-ha - cp+1sw+journal, in ms


def paired(results: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``ha.<metric>.ratio`` and ``ha.<metric>.added``: per repeat, then summarized; an
    error if either topology has no figures."""
    entries: dict[str, dict[str, Any]] = {}
    for metric, suffix, unit in [
        *((m, "ratio", "ratio") for m in RATIOS),
        *((m, "added", "ms") for m in ADDED),
    ]:
        of = [f"{NAME}.{metric}.{REPLICATED}", f"{NAME}.{metric}.{DURABLE}"]
        a, b = (results.get(key, {}).get("values") for key in of)
        key = f"{NAME}.{metric}.{suffix}"
        if not a or not b or len(a) != len(b):
            entries[key] = {"error": f"no {metric} for both {REPLICATED} and {DURABLE}"}
            continue
        pairs = zip(a, b, strict=True)
        values = [x / y if suffix == "ratio" else x - y for x, y in pairs]
        entries[key] = {**summarize(values, unit), "of": of}
    return entries
