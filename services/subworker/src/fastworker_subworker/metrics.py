"""A subworker's Prometheus series, read from its state at scrape time.

Recording costs nothing on the task path beyond ``RunStats``' counters: this collector
turns them into metric families only when ``/metrics`` is asked. ``histogram_family`` is
shared with the control plane.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from fastworker_common.histogram import Histogram
from fastworker_protocol import WorkerState

if TYPE_CHECKING:
    from fastworker_subworker.processes import ProcessPool
    from fastworker_subworker.worker import Subworker


def histogram_family(
    name: str,
    documentation: str,
    labels: Sequence[str],
    histograms: Iterable[tuple[Sequence[str], Histogram]],
) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, documentation, labels=list(labels))
    for values, histogram in histograms:
        buckets = [(_bound(le), float(n)) for le, n in histogram.cumulative()]
        family.add_metric(list(values), buckets, histogram.sum)
    return family


def _bound(le: float) -> str:
    return "+Inf" if le == float("inf") else repr(le)


class SubworkerCollector(Collector):
    def __init__(self, worker: Subworker) -> None:
        self._worker = worker

    def collect(self) -> Iterator[Metric]:
        worker, stats = self._worker, self._worker.stats
        tasks = CounterMetricFamily(
            "fastworker_subworker_tasks",
            "Task attempts this subworker finished, by outcome (success or the error reason)",
            labels=["task_name", "outcome"],
        )
        for (name, outcome), n in sorted(stats.outcomes.items()):
            tasks.add_metric([name, outcome], n)
        yield tasks
        yield histogram_family(
            "fastworker_subworker_task_run_seconds",
            "How long task attempts ran on this subworker",
            ["task_name"],
            (([name], h) for name, h in sorted(stats.run_time.items())),
        )
        yield CounterMetricFamily(
            "fastworker_subworker_quick_lane_tasks",
            "Tasks fetched, run and reported on the quick lane's thread (trivial sync tasks)",
            value=worker.quick_lane_runs,
        )
        yield GaugeMetricFamily(
            "fastworker_subworker_in_flight",
            "Tasks held: running or waiting for a slot",
            value=worker.in_flight,
        )
        yield GaugeMetricFamily(
            "fastworker_subworker_concurrency",
            "Tasks this subworker runs at once",
            value=worker.config.concurrency,
        )
        yield GaugeMetricFamily(
            "fastworker_subworker_registered",
            "1 while registered with a control plane",
            value=1 if worker.registered else 0,
        )
        if worker.processes is not None:
            yield from _process_pool_families(worker.processes)
        state = GaugeMetricFamily(
            "fastworker_subworker_state",
            "The lifecycle state (1 for the current one)",
            labels=["state"],
        )
        for s in WorkerState:
            state.add_metric([str(s)], 1 if worker.state == s else 0)
        yield state


def _process_pool_families(pool: ProcessPool) -> Iterator[Metric]:
    """Only for a subworker with process tasks (one without has no pool at all)."""
    yield GaugeMetricFamily(
        "fastworker_subworker_processes",
        "Child processes of the process pool alive now",
        value=pool.alive,
    )
    yield CounterMetricFamily(
        "fastworker_subworker_process_recycled",
        "Child processes replaced after --max-tasks-per-child or --max-memory-per-child",
        value=pool.recycled,
    )
    yield CounterMetricFamily(
        "fastworker_subworker_process_crashed",
        "Child processes that died under a task (the task failed with worker_crashed)",
        value=pool.crashed,
    )
    yield CounterMetricFamily(
        "fastworker_subworker_process_terminated",
        "Child processes ended by the subworker: a time limit, a cancel, or a drain",
        value=pool.terminated,
    )


def subworker_registry(worker: Subworker) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=True)
    registry.register(SubworkerCollector(worker))
    return registry
