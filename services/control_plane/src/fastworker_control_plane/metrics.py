"""The control plane's Prometheus series, read from the board at scrape time.

The board counts as tasks move (``core/stats``); this collector only turns those numbers
and the live state (queues, workers, cache) into metric families when ``/metrics`` is
asked, so the task path never touches prometheus-client. Labels are task names,
priorities and worker states: bounded sets, never task ids.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from fastworker import __version__
from fastworker_control_plane.core.stats import Tally
from fastworker_control_plane.engine import Engine
from fastworker_control_plane.events import DEFAULT_BACKLOG, EVENT_BYTES
from fastworker_control_plane.waiters import HELD_WAIT_BYTES
from fastworker_protocol import Priority, WorkerState
from fastworker_subworker import Subworker
from fastworker_subworker.metrics import SubworkerCollector, histogram_family

_TALLY_HELP = {
    Tally.SUBMITTED: "Tasks accepted",
    Tally.STARTED: "Task attempts started",
    Tally.SUCCEEDED: "Tasks that succeeded",
    Tally.FAILED: "Tasks that failed for good (retries exhausted or not retried)",
    Tally.RETRIED: "Failed attempts scheduled for a retry",
    Tally.CANCELLED: "Tasks cancelled",
}


class ControlPlaneCollector(Collector):
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def collect(self) -> Iterator[Metric]:
        yield from self._task_counters()
        yield from self._live_state()
        yield from self._result_cache()
        yield from self._workflows()
        yield from self._kept_bytes()
        yield GaugeMetricFamily(
            "fastworker_idempotency_keys",
            "Idempotency keys held: about as many as the live tasks and kept results "
            "submitted with one",
            value=self._engine.view.idempotency_keys,
        )
        yield GaugeMetricFamily(
            "fastworker_dead_letters",
            "Tasks failed for good held in the dead-letter store (to find and retry)",
            value=self._engine.view.dead_letter_count,
        )
        events = self._engine.events
        yield CounterMetricFamily(
            "fastworker_events_published",
            "Task events published on the event bus",
            value=events.published,
        )
        yield CounterMetricFamily(
            "fastworker_events_dropped",
            "Task events a slow subscriber (e.g. a dashboard) missed",
            value=events.dropped,
        )
        info = GaugeMetricFamily(
            "fastworker_control_plane_info", "Version of this control plane", labels=["version"]
        )
        info.add_metric([__version__], 1)
        yield info

    def _workflows(self) -> Iterator[Metric]:
        runner = self._engine.workflows
        outcomes = CounterMetricFamily(
            "fastworker_workflows",
            "Workflows that ended, by outcome (since this control plane started)",
            labels=["outcome"],
        )
        for outcome in ("success", "failure", "cancelled"):
            outcomes.add_metric([outcome], runner.outcomes[outcome])
        yield outcomes
        yield GaugeMetricFamily(
            "fastworker_workflows_running", "Workflows not yet final", value=runner.book.running
        )

    def _task_counters(self) -> Iterator[Metric]:
        stats = self._engine.view.stats
        families = {
            tally: CounterMetricFamily(
                f"fastworker_tasks_{tally}", _TALLY_HELP[tally], labels=["task_name", "priority"]
            )
            for tally in Tally
        }
        for (tally, name, priority), n in sorted(stats.counts.items()):
            families[tally].add_metric([name, priority], n)
        yield from families.values()
        labels = ["task_name", "priority"]
        yield histogram_family(
            "fastworker_task_run_seconds",
            "How long task attempts ran (measured by the subworker)",
            labels,
            (([n, p], h) for (n, p), h in sorted(stats.run_time.items())),
        )
        yield histogram_family(
            "fastworker_task_queue_wait_seconds",
            "How long tasks waited in their queue before an attempt started",
            labels,
            (([n, p], h) for (n, p), h in sorted(stats.queue_wait.items())),
        )

    def _live_state(self) -> Iterator[Metric]:
        view = self._engine.view
        now = self._engine.clock()
        depth = GaugeMetricFamily(
            "fastworker_queue_depth",
            "Tasks queued in each named queue, by priority (those waiting on a limit included)",
            labels=["queue", "priority"],
        )
        oldest = GaugeMetricFamily(
            "fastworker_queue_oldest_age_seconds",
            "How long the longest-waiting task queued in each named queue has waited",
            labels=["queue"],
        )
        for info in view.queue_infos(now, with_default=True):
            for priority in Priority.by_rank():
                depth.add_metric([info.name, str(priority)], info.depth[str(priority)])
            oldest.add_metric([info.name], info.oldest_age or 0.0)
        yield depth
        yield oldest
        waiting = GaugeMetricFamily(
            "fastworker_limit_waiting",
            "Queued tasks a rate or concurrency limit holds back now",
            labels=["queue", "task_name"],
        )
        for (queue, name), n in sorted(view.waiting_on_limits(now).items()):
            waiting.add_metric([queue, name], n)
        yield waiting
        yield GaugeMetricFamily(
            "fastworker_tasks_scheduled",
            "Tasks waiting for their ETA or retry backoff",
            value=view.waiting_for_time(),
        )
        yield GaugeMetricFamily(
            "fastworker_tasks_in_flight",
            "Tasks assigned to subworkers and not yet finished",
            value=view.in_flight(),
        )
        workers = GaugeMetricFamily(
            "fastworker_subworkers_connected",
            "Registered subworkers (the embedded one included), by state",
            labels=["state"],
        )
        by_state = dict.fromkeys(WorkerState, 0) | view.worker_states()
        for state, n in by_state.items():
            workers.add_metric([str(state)], n)
        yield workers
        budget = self._engine.waiters.budget
        yield GaugeMetricFamily(
            "fastworker_waits_held",
            "Requests held waiting for tasks or workflows (see --max-held-waits)",
            value=budget.held,
        )
        yield CounterMetricFamily(
            "fastworker_waits_refused",
            "Waits answered at once because --max-held-waits were held already",
            value=budget.refused,
        )

    def _kept_bytes(self) -> Iterator[Metric]:
        """What the control plane keeps, in bytes, beside the ceiling of each (``kept``)."""
        in_use = GaugeMetricFamily(
            "fastworker_kept_bytes",
            "Bytes the control plane keeps, by what (encoded sizes, or estimates of held "
            "requests and queued events)",
            labels=["kept"],
        )
        ceiling = GaugeMetricFamily(
            "fastworker_kept_bytes_limit",
            "The most bytes kept of each kind before the oldest go or new ones are refused",
            labels=["kept"],
        )
        for kept, used, limit in kept_bytes(self._engine):
            in_use.add_metric([kept], used)
            ceiling.add_metric([kept], limit)
        yield in_use
        yield ceiling

    def _result_cache(self) -> Iterator[Metric]:
        view = self._engine.view
        stats = view.results_stats
        yield GaugeMetricFamily(
            "fastworker_result_cache_size", "Results held in the cache", value=view.results
        )
        yield GaugeMetricFamily(
            "fastworker_result_cache_bytes",
            "Encoded bytes of the results held in the cache (see --result-max-bytes)",
            value=view.results_bytes,
        )
        for name, value, help_text in (
            ("hits", stats.hits, "Result reads answered from the cache"),
            ("misses", stats.misses, "Result reads of unknown or expired tasks"),
            ("evictions", stats.evictions, "Results dropped because the cache was full"),
            ("expirations", stats.expirations, "Results dropped after their TTL"),
        ):
            yield CounterMetricFamily(f"fastworker_result_cache_{name}", help_text, value=value)


def kept_bytes(engine: Engine) -> list[tuple[str, int, int]]:
    """``(kind, bytes in use, ceiling)`` of everything the control plane keeps that a client
    can make grow: the operations guide's table of memory ceilings, as numbers."""
    view, book, budget = engine.view, engine.workflows.book, engine.waiters.budget
    events = engine.events
    return [
        ("results", view.results_bytes, view.results_max_bytes),
        ("dead_letters", view.dead_letters_bytes, view.dead_letters_max_bytes),
        ("workflows_running", book.live_bytes, book.max_live_bytes),
        ("workflows_finished", book.finished_bytes, book.max_bytes),
        ("held_waits", budget.held * HELD_WAIT_BYTES, budget.max_held * HELD_WAIT_BYTES),
        (
            "event_streams",
            events.queued * EVENT_BYTES,
            events.max_subscriptions * DEFAULT_BACKLOG * EVENT_BYTES,
        ),
    ]


def control_plane_registry(
    engine: Engine, local: Subworker | None = None, more: Iterable[Collector] = ()
) -> CollectorRegistry:
    """Every series of this process: the control plane's, its embedded subworker's, and
    ``more`` (a replica's)."""
    registry = CollectorRegistry(auto_describe=True)
    registry.register(ControlPlaneCollector(engine))
    if local is not None:
        registry.register(SubworkerCollector(local))
    for collector in more:
        registry.register(collector)
    return registry
