"""The benchmark runs end to end in smoke mode and reports every figure.

Only completeness is checked: timings never decide whether this test passes.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
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
    "startup.help_ms",
    "startup.status_help_ms",
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
    "soak.tasks_per_s",
    "soak.rss_slope_mib_per_min.control_plane",
    "soak.rss_peak_mib.control_plane",
    "soak.rss_slope_mib_per_min.subworker",
    "soak.rss_peak_mib.subworker",
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


CHORD_KEYS = tuple(
    f"chord.{metric}.{topology}"
    for metric in ("submit_ms", "e2e_s", "steps_per_s")
    for topology in ("cp+1sw", "cp+1sw+journal")
)


@pytest.mark.integration
@pytest.mark.timeout(90)
def test_a_smoke_chord_of_50_calls_back_on_both_topologies_and_reports_every_figure(
    tmp_path: Path,
) -> None:
    # Given the chord scenario in smoke mode (a chord of 50 and its sum callback)
    out = tmp_path / "chord.json"
    # When it runs once on each of its topologies
    run = subprocess.run(
        [sys.executable, "-m", "bench", "--only", "chord", "--smoke", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=75,
        check=False,
    )
    # Then every callback summed right (else it exits 1) and every figure is a number
    assert run.returncode == 0, f"stdout:\n{run.stdout}\nstderr:\n{run.stderr}"
    doc = json.loads(out.read_text())
    results = doc["results"]
    assert [k for k in CHORD_KEYS if not _is_number(results.get(k, {}).get("median"))] == []
    assert sorted(results) == sorted(CHORD_KEYS)
    assert doc["config"]["sizes"]["chord"] == 50


HA_TOPOLOGIES = ("cp+1sw+journal", "cp-ha")
HA_KEYS = (
    *(
        f"ha.{metric}.{topology}"
        for metric in PER_TOPOLOGY
        if metric.split(".")[0] in ("latency", "pipelined", "batch")
        for topology in HA_TOPOLOGIES
    ),
    *(f"ha.{workload}.unreplicated_s.cp-ha" for workload in ("latency", "pipelined", "batch")),
    "ha.pipelined.tasks_per_s.ratio",
    "ha.batch.tasks_per_s.ratio",
    "ha.latency.p50_ms.added",
    "ha.latency.p99_ms.added",
    *(f"ha.{metric}.cp-ha" for metric in ("failover_s", "reruns", "finished_reruns")),
)


def _etcd_runnable() -> bool:
    """Installed, or CI (where a missing etcd must fail the test, not skip it)."""
    installed = shutil.which("etcd") is not None or Path("/usr/bin/etcd").exists()
    return installed or bool(os.environ.get("CI"))


def _processes_under(directory: Path) -> list[str]:
    """Processes whose command line names ``directory`` or that run inside it."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            argv = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue  # it ended meanwhile, or is not ours to read
        if str(directory) in argv or cwd.startswith(str(directory)):
            found.append(argv)
    return found


@pytest.mark.integration
@pytest.mark.timeout(90)
@pytest.mark.skipif(not _etcd_runnable(), reason="etcd is not installed (scripts/bootstrap.sh)")
def test_the_replicated_topology_runs_beside_the_durable_one_and_leaves_no_process(
    tmp_path: Path,
) -> None:
    # Given a benchmark whose temporary directories (etcd's data, the replicas' state
    # dirs, the logs) are all under tmp_path
    out = tmp_path / "ha.json"
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    # When it runs the ha scenario in smoke mode
    run = subprocess.run(
        [sys.executable, "-m", "bench", "--only", "ha", "--smoke", "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=75,
        check=False,
    )
    # Then every figure of both topologies and every paired figure is there
    assert run.returncode == 0, f"stdout:\n{run.stdout}\nstderr:\n{run.stderr}"
    results = json.loads(out.read_text())["results"]
    assert [k for k in HA_KEYS if not _is_number(results.get(k, {}).get("median"))] == []
    assert [k for k in results if not k.startswith("ha.")] == []
    # And etcd, both replicas and the subworker are gone
    assert _processes_under(tmp_path) == []


def _log_line(event: str, at: str) -> str:
    return json.dumps({"event": event, "level": "info", "timestamp": f"2026-12-03T16:04:{at}Z"})


def test_unreplicated_seconds_add_up_each_alone_window_and_an_unclosed_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a leader's log that went alone twice, recovering only from the first
    monkeypatch.syspath_prepend(str(ROOT))  # the benchmark is run from the root, not installed
    from bench.ha_cluster import ALONE, REPLICATED, unreplicated_seconds

    lines = [
        _log_line("journal compacted", "00.000000"),
        _log_line(ALONE[0], "01.000000"),
        "not json",
        _log_line(REPLICATED, "03.500000"),
        _log_line(ALONE[0], "10.000000"),
    ]
    now = dt.datetime(2026, 12, 3, 16, 4, 11, tzinfo=dt.UTC)
    # When the time spent alone is added up at `now`
    # Then the closed window counts 2.5 s and the open one 1 s
    assert unreplicated_seconds(lines, now) == pytest.approx(3.5)
    assert unreplicated_seconds(lines[:1], now) == 0.0
