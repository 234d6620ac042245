"""The benchmark runs end to end in smoke mode and reports every figure.

Only completeness is checked: timings never decide whether this test passes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOPOLOGIES = ("cp", "cp+1sw", "cp+2sw", "cp+1sw+journal")
PER_TOPOLOGY = (
    "latency.p50_ms",
    "latency.p99_ms",
    "latency.p999_ms",
    "pipelined.tasks_per_s",
    "batch.tasks_per_s",
    "io_bound.tasks_per_s",
    "io_bound.ratio_to_ideal",
)
TOPOLOGY_FREE = (
    "memory.rss_mb.idle",
    "memory.rss_mb.queued_100k",
    "memory.rss_mb.drained",
    "floor.latency.p50_ms",
    "floor.latency.p99_ms",
    "floor.latency.p999_ms",
    "floor.tasks_per_s.batched",
    "floor.tasks_per_s.single",
    "floor.blocking_rt_p50_ms",
    "floor.blocking_rt_p99_ms",
    "floor.blocking_rt_per_s",
)
SYNC_ONLY = (  # the blocking client runs on the peers' topology alone
    "sync.enqueue_per_s.cp+1sw",
    "sync.e2e_per_s.cp+1sw",
    "sync.p50_ms.cp+1sw",
    "sync.p99_ms.cp+1sw",
)
CPU_TOPOLOGIES = ("cp+1sw+1proc", "cp+1sw+2proc", "cp+1sw+2proc+4slots", "cp+1sw+threads")
CPU_BOUND = (  # one subworker: process tasks with 1 and 2 children, the same work on threads
    *(f"cpu_bound.tasks_per_s.{t}" for t in CPU_TOPOLOGIES),
    "cpu_bound.task_ms",
    "cpu_bound.speedup.2proc_over_1proc",
    "cpu_bound.speedup.2proc_4slots_over_1proc",
    "cpu_bound.speedup.threads_over_1proc",
)
EXPECTED_KEYS = (
    [f"{m}.{t}" for m in PER_TOPOLOGY for t in TOPOLOGIES]
    + list(TOPOLOGY_FREE)
    + list(SYNC_ONLY)
    + list(CPU_BOUND)
)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@pytest.mark.integration
@pytest.mark.timeout(660)
def test_a_smoke_run_exits_0_and_writes_a_numeric_median_for_every_key(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    run = subprocess.run(
        [sys.executable, "-m", "bench", "--smoke", "--repeats", "1", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, f"stdout:\n{run.stdout}\nstderr:\n{run.stderr}"
    doc = json.loads(out.read_text())
    results = doc["results"]
    assert [k for k in EXPECTED_KEYS if k not in results] == []
    assert [k for k in results if k.startswith("sync.") and k not in SYNC_ONLY] == []
    assert [k for k in results if k.startswith("cpu_bound.") and k not in CPU_BOUND] == []
    not_numeric = {k: results[k] for k in EXPECTED_KEYS if not _is_number(results[k].get("median"))}
    assert not_numeric == {}
    assert {"cores", "cpu_model", "python", "platform", "versions", "date"} <= set(doc["machine"])
    assert doc["config"]["repeats"] == 1
