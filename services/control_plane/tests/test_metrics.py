"""The control plane's Prometheus series, built from a real engine and task board at scrape
time and read back through prometheus-client's own text parser: no sockets."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from view_world import ADD, NOW, FakeClock, make_engine

from fastworker import __version__
from fastworker_control_plane.core.board import BoardConfig
from fastworker_control_plane.core.effects import Effects
from fastworker_control_plane.engine import Engine
from fastworker_control_plane.metrics import ControlPlaneCollector, control_plane_registry
from fastworker_protocol import (
    Outcome,
    Priority,
    TaskError,
    TaskSpec,
    WorkerState,
)
from fastworker_subworker.stats import RunStats

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from fastworker_subworker import Subworker

TALLIES = ("submitted", "started", "succeeded", "failed", "retried", "cancelled")
Labels = tuple[tuple[str, str], ...]


@pytest.fixture
def engine() -> Engine:
    return make_engine()


def scrape(registry: CollectorRegistry) -> dict[str, Metric]:
    text = generate_latest(registry).decode()
    return {family.name: family for family in text_string_to_metric_families(text)}


def scrape_engine(engine: Engine) -> dict[str, Metric]:
    registry = CollectorRegistry()
    registry.register(ControlPlaneCollector(engine))
    return scrape(registry)


def values(family: Metric, suffix: str = "") -> dict[Labels, float]:
    """The samples named ``family.name + suffix``, by their sorted labels."""
    return {
        tuple(sorted(s.labels.items())): s.value
        for s in family.samples
        if s.name == family.name + suffix
    }


def value(family: Metric, suffix: str = "", **labels: str) -> float:
    return values(family, suffix)[tuple(sorted(labels.items()))]


def buckets(family: Metric, **labels: str) -> dict[str, float]:
    return {
        s.labels["le"]: s.value
        for s in family.samples
        if s.name == family.name + "_bucket"
        and all(s.labels.get(k) == v for k, v in labels.items())
    }


def submit(
    engine: Engine, *task_ids: str, name: str = "add", priority: Priority = Priority.NORMAL
) -> Effects:
    """Submit on the board; the effects with their transitions, to publish."""
    args = [1] if name == "add" else []
    specs = [TaskSpec(name=name, id=t, args=args) for t in task_ids]
    return engine.board.submit(specs, priority, engine.clock(), record=True)[1]


def dispatched(engine: Engine, worker_id: str = "w1") -> list[str]:
    return [a.id for a in engine.board.dispatch([worker_id])[0].get(worker_id, [])]


def report(engine: Engine, *outcomes: Outcome, started: tuple[str, ...] = ()) -> None:
    engine.board.report("w1", started, outcomes, engine.clock())


def failure(task_id: str) -> Outcome:
    return Outcome(task_id=task_id, ok=False, error=TaskError(type="RuntimeError", message="x"))


def run_a_workload(engine: Engine) -> None:
    """A success, a plain failure, a retried-then-successful task, a cancelled one."""
    clock = cast("FakeClock", engine.clock)
    submit(engine, "id-success-0001", "id-failure-0002")
    submit(engine, "id-flaky-0003", name="flaky", priority=Priority.HIGH)
    submit(engine, "id-cancel-0004", priority=Priority.LOW)
    engine.board.cancel("id-cancel-0004", clock.now)
    dispatched(engine)
    clock.now = NOW + 2
    report(engine, started=("id-success-0001", "id-failure-0002", "id-flaky-0003"))
    clock.now = NOW + 3
    report(
        engine,
        Outcome(task_id="id-success-0001", ok=True, started_at=NOW + 2, finished_at=NOW + 2.5),
        Outcome(
            task_id="id-failure-0002",
            ok=False,
            error=TaskError(type="RuntimeError", message="x"),
            started_at=NOW + 2,
            finished_at=NOW + 47,  # 45 s: between the 30 and 60 s buckets
        ),
        failure("id-flaky-0003"),
    )
    clock.now = NOW + 4
    assert engine.board.release_due(clock.now).queued == 1
    dispatched(engine)
    clock.now = NOW + 5
    report(engine, Outcome(task_id="id-flaky-0003", ok=True))


def test_every_family_is_named_with_the_fastworker_prefix(engine: Engine) -> None:
    run_a_workload(engine)

    families = scrape_engine(engine)

    assert families
    assert all(name.startswith("fastworker_") for name in families)


def test_the_task_tallies_are_total_counters_by_task_name_and_priority(engine: Engine) -> None:
    run_a_workload(engine)

    families = scrape_engine(engine)

    for tally in TALLIES:
        family = families[f"fastworker_tasks_{tally}"]
        assert family.type == "counter"
        assert {s.name for s in family.samples} <= {f"fastworker_tasks_{tally}_total"}
    counted = {
        tally: {
            (labels[0][1], labels[1][1]): n
            for labels, n in values(families[f"fastworker_tasks_{tally}"], "_total").items()
        }
        for tally in TALLIES
    }
    assert counted == {
        "submitted": {("low", "add"): 1, ("normal", "add"): 2, ("high", "flaky"): 1},
        "started": {("normal", "add"): 2, ("high", "flaky"): 2},
        "succeeded": {("normal", "add"): 1, ("high", "flaky"): 1},
        "failed": {("normal", "add"): 1},
        "retried": {("high", "flaky"): 1},
        "cancelled": {("low", "add"): 1},
    }


def test_the_text_exposition_names_counters_with_total(engine: Engine) -> None:
    submit(engine, "t1")
    registry = CollectorRegistry()
    registry.register(ControlPlaneCollector(engine))

    text = generate_latest(registry).decode()

    assert 'fastworker_tasks_submitted_total{priority="normal",task_name="add"} 1.0' in text
    assert "fastworker_tasks_submitted{" not in text


@pytest.mark.parametrize(
    "name", ["fastworker_task_run_seconds", "fastworker_task_queue_wait_seconds"]
)
def test_the_seconds_histograms_have_the_long_buckets_and_infinity(
    engine: Engine, name: str
) -> None:
    run_a_workload(engine)

    family = scrape_engine(engine)[name]

    assert family.type == "histogram"
    add = buckets(family, task_name="add", priority="normal")
    assert {"30.0", "60.0", "300.0", "900.0", "+Inf"} <= set(add)
    assert list(add.values()) == sorted(add.values())
    assert add["+Inf"] == value(family, "_count", task_name="add", priority="normal")


def test_the_run_time_histogram_holds_each_attempt_from_the_subworkers_clock(
    engine: Engine,
) -> None:
    run_a_workload(engine)

    family = scrape_engine(engine)["fastworker_task_run_seconds"]

    add = buckets(family, task_name="add", priority="normal")
    assert (add["0.5"], add["30.0"], add["60.0"], add["+Inf"]) == (1.0, 1.0, 2.0, 2.0)
    assert value(family, "_sum", task_name="add", priority="normal") == 45.5
    assert value(family, "_count", task_name="flaky", priority="high") == 2.0


def test_the_queue_wait_histogram_holds_each_start(engine: Engine) -> None:
    run_a_workload(engine)

    family = scrape_engine(engine)["fastworker_task_queue_wait_seconds"]

    assert value(family, "_count", task_name="add", priority="normal") == 2.0
    assert value(family, "_sum", task_name="add", priority="normal") == 4.0  # 2 s each
    # flaky: 2 s before its first start, 1 s between its release and its second outcome
    assert value(family, "_sum", task_name="flaky", priority="high") == 3.0


def test_label_sets_are_bounded_names_never_task_ids(engine: Engine) -> None:
    run_a_workload(engine)

    families = scrape_engine(engine)

    allowed = {"task_name", "priority", "queue", "state", "version", "le", "outcome", "kept"}
    label_names = {k for f in families.values() for s in f.samples for k in s.labels}
    assert label_names <= allowed
    label_values = {v for f in families.values() for s in f.samples for v in s.labels.values()}
    assert not any("id-" in v for v in label_values)
    assert {"add", "flaky", "normal", "high", "low"} <= label_values


def test_queue_depth_is_a_gauge_for_every_priority(engine: Engine) -> None:
    submit(engine, "n1", "n2")
    submit(engine, "h1", priority=Priority.HIGH)
    submit(engine, "c1", "c2", "c3", priority=Priority.CRITICAL)
    engine.board.cancel("n2", NOW)

    family = scrape_engine(engine)["fastworker_queue_depth"]

    assert family.type == "gauge"
    assert values(family) == {
        (("priority", "critical"), ("queue", "default")): 3.0,
        (("priority", "high"), ("queue", "default")): 1.0,
        (("priority", "normal"), ("queue", "default")): 1.0,
        (("priority", "low"), ("queue", "default")): 0.0,
    }


def test_an_empty_board_reports_zero_depth_for_every_priority(engine: Engine) -> None:
    family = scrape_engine(engine)["fastworker_queue_depth"]

    assert values(family) == {(("priority", str(p)), ("queue", "default")): 0.0 for p in Priority}


def test_scheduled_counts_delayed_and_retrying_tasks(engine: Engine) -> None:
    engine.board.submit(
        [TaskSpec(name="add", id="later", args=[1], eta=NOW + 60)], Priority.NORMAL, NOW
    )
    submit(engine, "r", name="flaky")
    dispatched(engine)
    report(engine, failure("r"))

    families = scrape_engine(engine)

    assert values(families["fastworker_tasks_scheduled"]) == {(): 2.0}
    depth = values(families["fastworker_queue_depth"])
    assert depth[(("priority", "normal"), ("queue", "default"))] == 0.0


def test_in_flight_counts_the_tasks_held_by_subworkers(engine: Engine) -> None:
    submit(engine, "a", "b", "c")
    dispatched(engine)
    report(engine, Outcome(task_id="a", ok=True))

    family = scrape_engine(engine)["fastworker_tasks_in_flight"]

    assert values(family) == {(): 2.0}


def test_subworkers_connected_are_counted_by_state_with_every_state_listed(
    engine: Engine,
) -> None:
    engine.board.register("w2", "host-w2", 2, [ADD], NOW)
    engine.board.register("w3", "host-w3", 2, [ADD], NOW, local=True)
    engine.board.drain("w2", NOW)

    family = scrape_engine(engine)["fastworker_subworkers_connected"]

    assert family.type == "gauge"
    expected = {(("state", str(s)),): 0.0 for s in WorkerState}
    expected[(("state", "running"),)] = 2.0
    expected[(("state", "draining"),)] = 1.0
    assert values(family) == expected


def test_the_result_cache_size_hits_misses_evictions_and_expirations() -> None:
    engine = make_engine(BoardConfig(result_max_size=2, result_ttl=10.0))
    submit(engine, "a", "b", "c")
    dispatched(engine)
    report(engine, *(Outcome(task_id=t, ok=True) for t in ("a", "b", "c")))  # "a" evicted
    board = engine.board
    board.get("b", NOW)  # hit
    board.get("a", NOW)  # miss
    board.get("c", NOW + 10)  # expired: an expiration and a miss

    families = scrape_engine(engine)

    numbers = {
        name: values(families[f"fastworker_result_cache_{name}"], suffix)
        for name, suffix in (
            ("size", ""),
            ("hits", "_total"),
            ("misses", "_total"),
            ("evictions", "_total"),
            ("expirations", "_total"),
        )
    }
    assert numbers == {
        "size": {(): 1.0},
        "hits": {(): 1.0},
        "misses": {(): 2.0},
        "evictions": {(): 1.0},
        "expirations": {(): 1.0},
    }
    assert families["fastworker_result_cache_size"].type == "gauge"
    assert families["fastworker_result_cache_hits"].type == "counter"


def test_the_result_cache_bytes_gauge_follows_what_is_kept_and_evicted() -> None:
    engine = make_engine(BoardConfig(result_max_bytes=2500))
    submit(engine, "a", "b", "c")
    dispatched(engine)
    report(engine, *(Outcome(task_id=t, ok=True, result="r" * 1000) for t in ("a", "b", "c")))

    family = scrape_engine(engine)["fastworker_result_cache_bytes"]

    assert family.type == "gauge"
    assert values(family) == {(): float(engine.board.results.bytes)}
    assert 2000 < engine.board.results.bytes <= 2500  # "a" went: three do not fit
    evictions = scrape_engine(engine)["fastworker_result_cache_evictions"]
    assert values(evictions, "_total") == {(): 1.0}


def test_published_and_dropped_events_are_counters(engine: Engine) -> None:
    engine.events.subscribe(backlog=1)
    effects = submit(engine, "a", "b", "c")
    engine.events.publish(effects.changes, NOW)

    families = scrape_engine(engine)

    assert values(families["fastworker_events_published"], "_total") == {(): 3.0}
    assert values(families["fastworker_events_dropped"], "_total") == {(): 2.0}


def test_the_info_gauge_carries_the_version(engine: Engine) -> None:
    family = scrape_engine(engine)["fastworker_control_plane_info"]

    assert values(family) == {(("version", __version__),): 1.0}


def test_an_idle_control_plane_exposes_its_families_without_task_samples(
    engine: Engine,
) -> None:
    families = scrape_engine(engine)

    for tally in TALLIES:
        assert families[f"fastworker_tasks_{tally}"].samples == []
    assert families["fastworker_task_run_seconds"].samples == []
    assert families["fastworker_task_queue_wait_seconds"].samples == []
    assert values(families["fastworker_tasks_in_flight"]) == {(): 0.0}
    assert values(families["fastworker_tasks_scheduled"]) == {(): 0.0}


@dataclass
class FakeConfig:
    concurrency: int = 2


@dataclass
class FakeSubworker:
    stats: RunStats = field(default_factory=RunStats)
    in_flight: int = 1
    quick_lane_runs: int = 0
    config: FakeConfig = field(default_factory=FakeConfig)
    registered: bool = True
    state: WorkerState = WorkerState.RUNNING
    processes: None = None  # no process tasks: no pool


def test_the_registry_adds_the_embedded_subworkers_series_when_there_is_one(
    engine: Engine,
) -> None:
    alone = scrape(control_plane_registry(engine))
    embedded = scrape(control_plane_registry(engine, cast("Subworker", FakeSubworker())))

    assert not any(name.startswith("fastworker_subworker_") for name in alone)
    assert "fastworker_tasks_submitted" in alone
    assert set(alone) < set(embedded)
    assert values(embedded["fastworker_subworker_in_flight"]) == {(): 1.0}


def test_the_collector_reads_the_board_at_every_scrape(engine: Engine) -> None:
    registry = control_plane_registry(engine)
    before = scrape(registry)

    submit(engine, "t1")

    after = scrape(registry)
    assert values(before["fastworker_tasks_submitted"], "_total") == {}
    assert values(after["fastworker_tasks_submitted"], "_total") == {
        (("priority", "normal"), ("task_name", "add")): 1.0
    }


def test_what_is_kept_is_given_in_bytes_beside_its_ceiling(engine: Engine) -> None:
    engine.events.subscribe(backlog=10)
    effects = submit(engine, "a", "b")
    engine.events.publish(effects.changes, NOW)

    families = scrape_engine(engine)
    in_use = values(families["fastworker_kept_bytes"])
    ceiling = values(families["fastworker_kept_bytes_limit"])

    kinds = {labels[0][1] for labels in in_use}
    assert kinds == {
        "results", "dead_letters", "workflows_running", "workflows_finished",
        "held_waits", "event_streams",
    }  # fmt: skip
    assert set(ceiling) == set(in_use)
    assert in_use[(("kept", "event_streams"),)] == 2 * 256  # two queued events
    assert in_use[(("kept", "held_waits"),)] == 0
    assert ceiling[(("kept", "results"),)] == engine.board.results.max_bytes
    assert ceiling[(("kept", "held_waits"),)] == engine.waiters.budget.max_held * 7 * 1024
    assert all(in_use[k] <= ceiling[k] for k in in_use)
