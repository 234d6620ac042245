"""The Prometheus series of a control plane and its subworkers, scraped by a real
Prometheus server after a known workload and read back through its query API."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import aiohttp
import prometheus_server
import pytest
from harness import Cluster
from prometheus_client.parser import text_string_to_metric_families
from prometheus_server import PrometheusServer

from fastworker import Client, Priority, TaskStatus
from fastworker.testing import free_port_block

pytestmark = pytest.mark.integration

NORMAL_ADDS = 60
HIGH_ADDS = 15
EXPLOSIONS = 5  # `explode` is not retried: one attempt each, then failure for good
FLAKY = 3  # `flaky` succeeding on its 2nd attempt: one retry each
SUCCESSES = NORMAL_ADDS + HIGH_ADDS + FLAKY
ATTEMPTS = NORMAL_ADDS + HIGH_ADDS + EXPLOSIONS + 2 * FLAKY
QUERY_TIMEOUT = 20.0  # the first scrape lands ~5 s after Prometheus starts

needs_prometheus = pytest.mark.skipif(
    not prometheus_server.runnable(),
    reason="install Debian's prometheus package (scripts/test does it)",
)


async def _run_known_workload(client: Client, tmp_path: Path) -> None:
    """Submit the workload all at once and wait for every result."""
    normal = [client.delay("add", i, 1) for i in range(NORMAL_ADDS)]
    high = [client.delay("add", i, 2, priority=Priority.HIGH) for i in range(HIGH_ADDS)]
    failing = [client.delay("explode", f"boom {i}") for i in range(EXPLOSIONS)]
    flaky = [client.delay("flaky", str(tmp_path / f"flaky-{i}"), 2) for i in range(FLAKY)]
    task_ids = await asyncio.gather(*normal, *high, *failing, *flaky)
    results = await client.wait_results(task_ids, timeout=30)
    statuses = [r.status for r in results]
    assert (
        statuses
        == [TaskStatus.SUCCESS] * (NORMAL_ADDS + HIGH_ADDS)
        + [TaskStatus.FAILURE] * EXPLOSIONS
        + [TaskStatus.SUCCESS] * FLAKY
    )
    assert [r.attempts for r in results[-FLAKY:]] == [2] * FLAKY


def _by(result: list[dict[str, Any]], *labels: str) -> dict[tuple[str, ...], float]:
    """A query result as {label values: number}."""
    return {
        tuple(r["metric"].get(label, "") for label in labels): float(r["value"][1]) for r in result
    }


async def _query(
    prom: PrometheusServer, expr: str, want: dict[tuple[str, ...], float], *labels: str
) -> None:
    """Wait until ``expr`` reads exactly ``want`` (by ``labels``)."""
    await asyncio.to_thread(
        prom.wait_for, expr, lambda result: _by(result, *labels) == want, QUERY_TIMEOUT
    )


@needs_prometheus
async def test_prometheus_reads_back_the_exact_counts_of_a_known_workload(
    cluster: Cluster, tmp_path: Path
) -> None:
    # Given a control plane that runs nothing itself and two subworkers with metrics ports
    cluster.control_plane(local_concurrency=0)
    metrics_ports = [free_port_block(1), free_port_block(1)]
    while metrics_ports[1] == metrics_ports[0]:
        metrics_ports[1] = free_port_block(1)
    for port in metrics_ports:
        cluster.subworker("--metrics-port", str(port))
    async with cluster.client() as client:
        await cluster.workers(client, 2)
        # When a known workload has run to the end
        await _run_known_workload(client, tmp_path)

    # Then Prometheus, scraping all three processes, reads back exactly that workload
    subworkers = [f"127.0.0.1:{port}" for port in metrics_ports]
    control_plane = f"127.0.0.1:{cluster.http_port}"
    targets = {"control-plane": [control_plane], "subworker": subworkers}
    with PrometheusServer(tmp_path, targets) as prom:
        await asyncio.to_thread(prom.wait_for_targets_up, QUERY_TIMEOUT)
        await _query(
            prom,
            "up",
            {("control-plane", control_plane): 1, **{("subworker", s): 1 for s in subworkers}},
            "job",
            "instance",
        )

        await _query(
            prom,
            'fastworker_tasks_submitted_total{job="control-plane"}',
            {
                ("it_tasks.add", "normal"): NORMAL_ADDS,
                ("it_tasks.add", "high"): HIGH_ADDS,
                ("it_tasks.explode", "normal"): EXPLOSIONS,
                ("it_tasks.flaky", "normal"): FLAKY,
            },
            "task_name",
            "priority",
        )
        await _query(
            prom,
            'fastworker_tasks_succeeded_total{job="control-plane"}',
            {
                ("it_tasks.add", "normal"): NORMAL_ADDS,
                ("it_tasks.add", "high"): HIGH_ADDS,
                ("it_tasks.flaky", "normal"): FLAKY,
            },
            "task_name",
            "priority",
        )
        await _query(
            prom,
            'fastworker_tasks_failed_total{job="control-plane"}',
            {("it_tasks.explode", "normal"): EXPLOSIONS},
            "task_name",
            "priority",
        )
        # and what the control plane keeps, beside each ceiling (the defaults)
        mib = 1024 * 1024
        await _query(
            prom,
            'fastworker_kept_bytes_limit{job="control-plane"}',
            {
                ("results",): 64 * mib,
                ("dead_letters",): 32 * mib,
                ("workflows_running",): 32 * mib,
                ("workflows_finished",): 16 * mib,
                ("held_waits",): 5_000 * 7 * 1024,
                ("event_streams",): 8 * 10_000 * 256,
            },
            "kept",
        )
        await _query(
            prom,
            'fastworker_tasks_retried_total{job="control-plane"}',
            {("it_tasks.flaky", "normal"): FLAKY},
            "task_name",
            "priority",
        )
        await _query(
            prom,
            'sum(fastworker_tasks_started_total{job="control-plane"})',
            {(): ATTEMPTS},
        )
        await _query(prom, 'sum(fastworker_tasks_cancelled_total{job="control-plane"})', {})

        # Every attempt was timed, on the control plane and on the subworker that ran it
        await _query(
            prom,
            'fastworker_task_run_seconds_count{job="control-plane"}',
            {
                ("it_tasks.add", "normal"): NORMAL_ADDS,
                ("it_tasks.add", "high"): HIGH_ADDS,
                ("it_tasks.explode", "normal"): EXPLOSIONS,
                ("it_tasks.flaky", "normal"): 2 * FLAKY,
            },
            "task_name",
            "priority",
        )
        await _query(
            prom,
            'sum(fastworker_task_queue_wait_seconds_count{job="control-plane"})',
            {(): ATTEMPTS},
        )
        await _query(
            prom,
            'sum(fastworker_task_run_seconds_bucket{job="control-plane", le="+Inf"})',
            {(): ATTEMPTS},
        )
        await _query(
            prom,
            'sum(fastworker_subworker_task_run_seconds_count{job="subworker"})',
            {(): ATTEMPTS},
        )

        # The subworkers between them ran every success, and each ran some
        await _query(
            prom,
            'sum(fastworker_subworker_tasks_total{job="subworker", outcome="success"})',
            {(): SUCCESSES},
        )
        await _query(
            prom,
            'sum by (task_name, outcome) (fastworker_subworker_tasks_total{job="subworker"})',
            {
                ("it_tasks.add", "success"): NORMAL_ADDS + HIGH_ADDS,
                ("it_tasks.explode", "exception"): EXPLOSIONS,
                ("it_tasks.flaky", "exception"): FLAKY,
                ("it_tasks.flaky", "success"): FLAKY,
            },
            "task_name",
            "outcome",
        )
        per_worker = await asyncio.to_thread(
            prom.wait_for,
            'sum by (instance) (fastworker_subworker_tasks_total{outcome="success"})',
            lambda result: len(result) == 2,
            QUERY_TIMEOUT,
        )
        done_by = _by(per_worker, "instance")
        assert set(done_by) == {(s,) for s in subworkers}
        assert all(n > 0 for n in done_by.values()), done_by
        assert sum(done_by.values()) == SUCCESSES

        # And the live state is idle: two running subworkers, nothing queued or held
        await _query(prom, 'fastworker_subworkers_connected{state="running"}', {(): 2})
        await _query(prom, "sum(fastworker_subworkers_connected)", {(): 2})
        await _query(
            prom,
            "fastworker_queue_depth",
            {(str(p),): 0 for p in Priority.by_rank()},
            "priority",
        )
        await _query(prom, "fastworker_tasks_in_flight", {(): 0})
        await _query(prom, "fastworker_tasks_scheduled", {(): 0})
        await _query(
            prom,
            'fastworker_subworker_registered{job="subworker"}',
            {(s,): 1 for s in subworkers},
            "instance",
        )
        await _query(
            prom,
            'fastworker_subworker_state{job="subworker", state="running"}',
            {(s,): 1 for s in subworkers},
            "instance",
        )
        await _query(
            prom,
            'fastworker_subworker_concurrency{job="subworker"}',
            {(s,): 4 for s in subworkers},
            "instance",
        )


HEX_ID = re.compile(r"[0-9a-f]{32}")


async def test_the_exposition_names_series_by_convention_and_never_labels_a_task_id(
    client: Client, cluster: Cluster, tmp_path: Path
) -> None:
    # Given tasks that succeeded, failed and were retried on the embedded subworker
    task_ids = [
        await client.delay("add", 1, 2),
        await client.delay("explode", "a message, not a label"),
        await client.delay("flaky", str(tmp_path / "flaky"), 2, priority=Priority.LOW),
    ]
    await client.wait_results(task_ids, timeout=20)

    # When /metrics is read
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{cluster.http}/metrics") as response,
    ):
        assert response.status == 200
        assert response.content_type == "text/plain"
        text = await response.text()

    # Then no label value is a task id (or anything like one), nor an error message
    families = list(text_string_to_metric_families(text))
    values = {v for f in families for s in f.samples for v in s.labels.values()}
    assert not values & set(task_ids)
    assert not [v for v in values if HEX_ID.search(v)]
    assert "a message, not a label" not in text
    assert {
        s.labels["task_name"] for f in families for s in f.samples if "task_name" in s.labels
    } == {
        "it_tasks.add",
        "it_tasks.explode",
        "it_tasks.flaky",
    }

    # And every series is ours, with the suffix its type calls for
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.MULTILINE))
    assert types
    assert all(name.startswith("fastworker_") for name in types), sorted(types)
    sample_names = re.findall(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]", text, re.MULTILINE)
    assert all(name.startswith("fastworker_") for name in sample_names)
    for name, kind in types.items():
        if kind == "counter":
            assert name.endswith("_total"), name
        elif kind == "histogram":
            assert name.endswith("_seconds"), name
            for suffix in ("_bucket", "_sum", "_count"):
                assert f"\n{name}{suffix}{{" in text, name + suffix
        else:
            assert kind == "gauge", (name, kind)
            assert not name.endswith("_total"), name
            # A gauge in seconds carries the unit, as Prometheus' own gauges do
            # (process_start_time_seconds); only the queue-age gauge measures time.
            assert not name.endswith("_seconds") or name.endswith("_age_seconds"), name
    assert {name for name, kind in types.items() if kind == "counter"} == {
        *(
            f"fastworker_tasks_{tally}_total"
            for tally in ("submitted", "started", "succeeded", "failed", "retried", "cancelled")
        ),
        "fastworker_result_cache_hits_total",
        "fastworker_result_cache_misses_total",
        "fastworker_result_cache_evictions_total",
        "fastworker_result_cache_expirations_total",
        "fastworker_events_published_total",
        "fastworker_events_dropped_total",
        "fastworker_workflows_total",
        "fastworker_subworker_tasks_total",
        "fastworker_subworker_quick_lane_tasks_total",
        "fastworker_waits_refused_total",
    }
    assert {name for name, kind in types.items() if kind == "histogram"} == {
        "fastworker_task_run_seconds",
        "fastworker_task_queue_wait_seconds",
        "fastworker_subworker_task_run_seconds",
    }
    assert {name for name, kind in types.items() if kind == "gauge"} == {
        "fastworker_queue_depth",
        "fastworker_queue_oldest_age_seconds",
        "fastworker_limit_waiting",
        "fastworker_tasks_scheduled",
        "fastworker_tasks_in_flight",
        "fastworker_subworkers_connected",
        "fastworker_result_cache_size",
        "fastworker_result_cache_bytes",
        "fastworker_waits_held",
        "fastworker_control_plane_info",
        "fastworker_workflows_running",
        "fastworker_dead_letters",
        "fastworker_idempotency_keys",
        "fastworker_kept_bytes",
        "fastworker_kept_bytes_limit",
        "fastworker_subworker_in_flight",
        "fastworker_subworker_concurrency",
        "fastworker_subworker_registered",
        "fastworker_subworker_state",
    }

    # And the histograms use Prometheus' default buckets plus the long tail
    bounds = re.findall(r'^fastworker_task_run_seconds_bucket\{[^}]*le="([^"]+)"', text, re.M)
    first = [*dict.fromkeys(bounds)]
    assert [float(b) for b in first] == [
        0.005,
        0.01,
        0.025,
        0.05,
        0.075,
        0.1,
        0.25,
        0.5,
        0.75,
        1.0,
        2.5,
        5.0,
        7.5,
        10.0,
        30.0,
        60.0,
        300.0,
        900.0,
        float("inf"),
    ]
