"""A subworker's run statistics and the Prometheus series its collector makes of them at
scrape time, read back through prometheus-client's own text parser."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from fastworker import Task, TaskRegistry
from fastworker_common.histogram import Histogram
from fastworker_protocol import Assignment, Outcome, TaskError, WorkerState
from fastworker_subworker.executor import Executor
from fastworker_subworker.metrics import (
    SubworkerCollector,
    histogram_family,
    subworker_registry,
)
from fastworker_subworker.runner import TaskRunner
from fastworker_subworker.stats import RunStats

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from fastworker_subworker import Subworker


@dataclass
class FakeConfig:
    concurrency: int = 4


@dataclass
class FakeWorker:
    """Only what ``SubworkerCollector`` reads of a ``Subworker``."""

    stats: RunStats = field(default_factory=RunStats)
    in_flight: int = 0
    quick_lane_runs: int = 0
    config: FakeConfig = field(default_factory=FakeConfig)
    registered: bool = False
    state: WorkerState = WorkerState.INIT
    processes: FakePool | None = None


@dataclass
class FakePool:
    """Only what ``SubworkerCollector`` reads of a ``ProcessPool``."""

    alive: int = 2
    recycled: int = 0
    crashed: int = 0
    terminated: int = 0


def outcome(
    ok: bool = True,
    reason: str | None = None,
    started: float | None = 100.0,
    finished: float | None = 100.5,
) -> Outcome:
    error = None if reason is None else TaskError(type="E", message="m", reason=reason)
    return Outcome(task_id="t", ok=ok, error=error, started_at=started, finished_at=finished)


def scrape(registry: CollectorRegistry) -> dict[str, Metric]:
    text = generate_latest(registry).decode()
    return {family.name: family for family in text_string_to_metric_families(text)}


def scrape_worker(worker: FakeWorker) -> dict[str, Metric]:
    registry = CollectorRegistry()
    registry.register(SubworkerCollector(cast("Subworker", worker)))
    return scrape(registry)


def values(family: Metric, suffix: str = "") -> dict[tuple[tuple[str, str], ...], float]:
    """The samples named ``family.name + suffix``, by their sorted labels."""
    return {
        tuple(sorted(s.labels.items())): s.value
        for s in family.samples
        if s.name == family.name + suffix
    }


def buckets(family: Metric, **labels: str) -> dict[str, float]:
    return {
        s.labels["le"]: s.value
        for s in family.samples
        if s.name.endswith("_bucket") and _matches(s, labels)
    }


class Fixed(Collector):
    def __init__(self, *families: Metric) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return self._families


def _matches(sample: Sample, labels: dict[str, str]) -> bool:
    return all(sample.labels.get(k) == v for k, v in labels.items())


# --- RunStats ---------------------------------------------------------------------------------


def test_a_successful_attempt_counts_as_success_with_its_run_time() -> None:
    stats = RunStats()

    stats.record("add", outcome(started=10.0, finished=10.25))

    assert stats.outcomes == {("add", "success"): 1}
    assert (stats.run_time["add"].count, stats.run_time["add"].sum) == (1, 0.25)


@pytest.mark.parametrize(
    "reason", ["exception", "timeout", "cancelled", "interrupted", "unserializable_result"]
)
def test_a_failed_attempt_counts_under_its_error_reason(reason: str) -> None:
    stats = RunStats()

    stats.record("add", outcome(ok=False, reason=reason))

    assert stats.outcomes == {("add", reason): 1}


def test_a_failed_attempt_without_an_error_counts_as_an_exception() -> None:
    stats = RunStats()

    stats.record("add", outcome(ok=False))

    assert stats.outcomes == {("add", "exception"): 1}


def test_an_attempt_without_both_times_is_counted_but_not_timed() -> None:
    stats = RunStats()

    stats.record("add", outcome(started=None))
    stats.record("add", outcome(finished=None))

    assert stats.outcomes == {("add", "success"): 2}
    assert stats.run_time == {}


def test_a_run_time_below_zero_is_clamped_to_zero() -> None:
    stats = RunStats()

    stats.record("add", outcome(started=10.0, finished=9.0))

    histogram = stats.run_time["add"]
    assert (histogram.count, histogram.sum, histogram.counts[0]) == (1, 0.0, 1)


def test_outcomes_and_run_times_are_kept_per_task_name() -> None:
    stats = RunStats()

    stats.record("add", outcome())
    stats.record("add", outcome(ok=False, reason="timeout"))
    stats.record("mul", outcome(started=0.0, finished=2.0))

    assert stats.outcomes == {("add", "success"): 1, ("add", "timeout"): 1, ("mul", "success"): 1}
    assert {name: h.count for name, h in stats.run_time.items()} == {"add": 2, "mul": 1}


# --- histogram_family -------------------------------------------------------------------------


def test_a_histogram_family_exposes_cumulative_buckets_sum_and_count() -> None:
    histogram = Histogram((1.0, 30.0))
    for value in (0.5, 1.0, 20.0, 100.0):
        histogram.observe(value)
    registry = CollectorRegistry()
    registry.register(
        Fixed(histogram_family("x_seconds", "help", ["task_name"], [(["add"], histogram)]))
    )

    family = scrape(registry)["x_seconds"]

    assert family.type == "histogram"
    assert buckets(family, task_name="add") == {"1.0": 2.0, "30.0": 3.0, "+Inf": 4.0}
    assert values(family, "_count") == {(("task_name", "add"),): 4.0}
    assert values(family, "_sum") == {(("task_name", "add"),): 121.5}


def test_a_histogram_family_without_histograms_has_no_samples() -> None:
    family = histogram_family("x_seconds", "help", ["task_name"], [])

    assert family.samples == []


# --- SubworkerCollector -----------------------------------------------------------------------


def test_task_attempts_are_a_counter_by_task_name_and_outcome() -> None:
    worker = FakeWorker()
    worker.stats.record("add", outcome())
    worker.stats.record("add", outcome())
    worker.stats.record("add", outcome(ok=False, reason="timeout"))
    worker.stats.record("mul", outcome(ok=False, reason="exception"))

    family = scrape_worker(worker)["fastworker_subworker_tasks"]

    assert family.type == "counter"
    assert values(family, "_total") == {
        (("outcome", "success"), ("task_name", "add")): 2.0,
        (("outcome", "timeout"), ("task_name", "add")): 1.0,
        (("outcome", "exception"), ("task_name", "mul")): 1.0,
    }


def test_run_time_is_a_seconds_histogram_by_task_name_with_the_long_buckets() -> None:
    worker = FakeWorker()
    worker.stats.record("add", outcome(started=0.0, finished=0.004))
    worker.stats.record("add", outcome(started=0.0, finished=45.0))
    worker.stats.record("add", outcome(started=0.0, finished=1200.0))

    family = scrape_worker(worker)["fastworker_subworker_task_run_seconds"]

    assert family.type == "histogram"
    add = buckets(family, task_name="add")
    assert {"30.0", "60.0", "300.0", "900.0", "+Inf"} <= set(add)
    assert (add["0.005"], add["30.0"], add["60.0"], add["900.0"], add["+Inf"]) == (
        1.0,
        1.0,
        2.0,
        2.0,
        3.0,
    )
    assert values(family, "_count") == {(("task_name", "add"),): 3.0}
    assert values(family, "_sum")[(("task_name", "add"),)] == pytest.approx(1245.004)


def test_the_gauges_report_in_flight_concurrency_and_registration() -> None:
    worker = FakeWorker(in_flight=3, config=FakeConfig(concurrency=8), registered=True)

    families = scrape_worker(worker)

    assert values(families["fastworker_subworker_in_flight"]) == {(): 3.0}
    assert values(families["fastworker_subworker_concurrency"]) == {(): 8.0}
    assert values(families["fastworker_subworker_registered"]) == {(): 1.0}
    assert all(
        families[name].type == "gauge"
        for name in (
            "fastworker_subworker_in_flight",
            "fastworker_subworker_concurrency",
            "fastworker_subworker_registered",
            "fastworker_subworker_state",
        )
    )


def test_the_quick_lane_counter_reports_the_tasks_run_there() -> None:
    families = scrape_worker(FakeWorker(quick_lane_runs=42))

    family = families["fastworker_subworker_quick_lane_tasks"]
    assert family.type == "counter"
    assert values(family, "_total") == {(): 42.0}


def test_an_unregistered_subworker_reports_zero() -> None:
    families = scrape_worker(FakeWorker(registered=False))

    assert values(families["fastworker_subworker_registered"]) == {(): 0.0}


@pytest.mark.parametrize("state", list(WorkerState))
def test_the_state_gauge_is_one_for_the_current_state_and_zero_for_the_others(
    state: WorkerState,
) -> None:
    families = scrape_worker(FakeWorker(state=state))

    assert values(families["fastworker_subworker_state"]) == {
        (("state", str(s)),): 1.0 if s == state else 0.0 for s in WorkerState
    }


def test_an_idle_subworker_exposes_every_family_with_no_task_samples() -> None:
    families = scrape_worker(FakeWorker())

    assert set(families) == {
        "fastworker_subworker_tasks",
        "fastworker_subworker_task_run_seconds",
        "fastworker_subworker_quick_lane_tasks",
        "fastworker_subworker_in_flight",
        "fastworker_subworker_concurrency",
        "fastworker_subworker_registered",
        "fastworker_subworker_state",
    }
    assert families["fastworker_subworker_tasks"].samples == []
    assert families["fastworker_subworker_task_run_seconds"].samples == []


def test_the_collector_reads_the_worker_at_every_scrape() -> None:
    worker = FakeWorker()
    registry = CollectorRegistry()
    registry.register(SubworkerCollector(cast("Subworker", worker)))
    before = values(scrape(registry)["fastworker_subworker_in_flight"])

    worker.in_flight = 2
    worker.stats.record("add", outcome())

    after = scrape(registry)
    assert (before, values(after["fastworker_subworker_in_flight"])) == ({(): 0.0}, {(): 2.0})
    assert values(after["fastworker_subworker_tasks"], "_total") == {
        (("outcome", "success"), ("task_name", "add")): 1.0
    }


def test_the_subworker_registry_serves_the_collector() -> None:
    worker = FakeWorker(state=WorkerState.RUNNING, registered=True)
    worker.stats.record("add", outcome())

    families = scrape(subworker_registry(cast("Subworker", worker)))

    assert values(families["fastworker_subworker_registered"]) == {(): 1.0}
    assert values(families["fastworker_subworker_tasks"], "_total") == {
        (("outcome", "success"), ("task_name", "add")): 1.0
    }


# --- what the runner records -------------------------------------------------------------------


async def test_an_async_task_cancelled_while_it_runs_is_counted_as_cancelled() -> None:
    started = asyncio.Event()

    async def wait_forever() -> None:
        started.set()
        await asyncio.Event().wait()

    registry = TaskRegistry()
    registry.add(Task(fn=wait_forever, name="wait"))
    reported: list[Outcome] = []
    runner = TaskRunner(Executor(registry), 1, lambda ids: None, reported.extend)
    try:
        runner.submit([Assignment(id="a", name="wait")])
        await started.wait()
        runner.cancel(["a"])
        await runner.drain(5)
    finally:
        runner.shutdown()

    assert [(o.task_id, o.error.reason if o.error else None) for o in reported] == [
        ("a", "cancelled")
    ]
    assert runner.stats.outcomes == {("wait", "cancelled"): 1}


async def test_a_sync_task_cancelled_on_its_thread_is_counted_as_cancelled() -> None:
    gate, entered = threading.Event(), threading.Event()

    def hold() -> int:
        entered.set()
        gate.wait(5)
        return 1

    registry = TaskRegistry()
    registry.add(Task(fn=hold, name="hold"))
    reported: list[Outcome] = []
    runner = TaskRunner(Executor(registry), 1, lambda ids: None, reported.extend)
    try:
        runner.submit([Assignment(id="s", name="hold")])
        assert await asyncio.to_thread(entered.wait, 5)
        runner.cancel(["s"])
        assert [(o.task_id, o.error.reason if o.error else None) for o in reported] == [
            ("s", "cancelled")
        ]
    finally:
        gate.set()
        await runner.drain(5)
        runner.shutdown()

    assert runner.stats.outcomes == {("hold", "cancelled"): 1}


def test_a_subworker_without_process_tasks_has_no_pool_series() -> None:
    metrics = scrape_worker(FakeWorker())
    assert not [name for name in metrics if "process" in name]


def test_the_process_pool_series_read_the_pool_at_scrape_time() -> None:
    pool = FakePool(alive=2, recycled=3, crashed=1, terminated=4)
    worker = FakeWorker(processes=pool)
    metrics = scrape_worker(worker)
    assert metrics["fastworker_subworker_processes"].samples[0].value == 2
    assert metrics["fastworker_subworker_process_recycled"].samples[0].value == 3
    assert metrics["fastworker_subworker_process_crashed"].samples[0].value == 1
    assert metrics["fastworker_subworker_process_terminated"].samples[0].value == 4
    pool.crashed = 2
    assert scrape_worker(worker)["fastworker_subworker_process_crashed"].samples[0].value == 2
