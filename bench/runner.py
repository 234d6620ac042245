"""Runs the selected scenarios, each repeated, and collects one summary per metric key.

Keys are ``scenario.metric.topology`` (``latency.p50_ms.cp+1sw``,
``ha.batch.tasks_per_s.cp-ha``), or ``scenario.metric`` for the topology-independent ones
(``startup.help_ms``, ``memory.rss_mb.idle``, ``floor.tasks_per_s.single``,
``cpu_bound.speedup.2proc_over_1proc``, ``ha.batch.tasks_per_s.ratio``). ``cpu_bound`` and
``ha`` start every topology's cluster first and take turns between them.
A scenario that fails records ``{"error": ...}`` under each of its keys and the run goes
on; only cancellation (Ctrl-C) stops it.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench import ha_scenario
from bench.chord_scenario import CHORD
from bench.cluster import Cluster, running_cluster
from bench.config import HA_TOPOLOGIES, REPLICATED, BenchConfig
from bench.cpu_scenario import CPU_BOUND, speedups, task_entry, turns
from bench.failover import FAILOVER_UNITS, measure_failovers
from bench.floor import FLOOR_UNITS, floor_session, measure_floor
from bench.floor_blocking import BLOCKING_FLOOR_UNITS, blocking_floor_session
from bench.ha_cluster import running_ha_cluster
from bench.memory import MEMORY_UNITS, measure_memory
from bench.procs import Supervisor
from bench.report import fmt
from bench.scenarios import SCENARIOS, Run, Scenario
from bench.soak import SOAK_UNITS, measure_soak
from bench.startup import STARTUP_UNITS, measure_startup
from bench.stats import summarize
from bench.sync_scenario import SYNC
from fastworker import Client, FastWorkerError

Collected = dict[str, list[float]]
CLUSTER_SCENARIOS: dict[str, Scenario] = {**SCENARIOS, SYNC.name: SYNC, CHORD.name: CHORD}


class ScenarioTimeout(RuntimeError):
    pass


def open_cluster(
    supervisor: Supervisor, topology: str, concurrency: int | None
) -> contextlib.AbstractAsyncContextManager[tuple[Cluster, Client]]:
    """A ready cluster of any topology, and its client (``running_cluster``'s contract)."""
    if topology == REPLICATED:
        return running_ha_cluster(supervisor, concurrency)
    return running_cluster(supervisor, topology, concurrency)


async def within(awaitable: Awaitable[dict[str, float]], timeout: float) -> dict[str, float]:
    """``awaitable``'s result, or ``ScenarioTimeout`` after ``timeout`` seconds."""
    try:
        return await asyncio.wait_for(awaitable, timeout)
    except TimeoutError as exc:
        if isinstance(exc, FastWorkerError):  # the SDK's own Timeout: a real error
            raise
        raise ScenarioTimeout(f"did not finish within {timeout:g} s") from None


@dataclass
class Runner:
    config: BenchConfig
    supervisor: Supervisor
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    _started: float = field(default_factory=time.monotonic)

    async def run(self) -> dict[str, dict[str, Any]]:
        for name in self.config.only:
            if name == "startup":
                await self._record(STARTUP_UNITS, "startup.{}", self._startup)
            elif name == "floor":
                await self._record(FLOOR_UNITS, "floor.{}", self._floor)
                await self._record(BLOCKING_FLOOR_UNITS, "floor.{}", self._blocking_floor)
            elif name == "memory":
                await self._record(MEMORY_UNITS, "memory.{}", self._memory)
            elif name == "soak":
                await self._record(SOAK_UNITS, "soak.{}", self._soak)
            elif name == CPU_BOUND.name:
                await self._cpu_bound()
            elif name == ha_scenario.NAME:
                await self._ha()
            else:
                scenario = CLUSTER_SCENARIOS[name]
                for topology in scenario.topologies:
                    await self._topology(scenario, topology)
        return self.results

    async def _topology(self, scenario: Scenario, topology: str) -> None:
        async def body() -> Collected:
            async with running_cluster(self.supervisor, topology, scenario.worker_concurrency) as (
                cluster,
                client,
            ):
                run = Run(
                    client, cluster.discovery, self.config.sizes, topology, self._timeout(scenario)
                )
                label = f"{scenario.name} {topology}"
                return await self._repeat(label, lambda: within(scenario.measure(run), run.timeout))

        await self._record(scenario.units, f"{scenario.name}.{{}}.{topology}", body)

    async def _cpu_bound(self) -> None:
        """Calibrated once (before any cluster runs), so every topology runs the same work;
        every topology's cluster started first, then the repeats take turns (see
        ``cpu_scenario``). A topology that fails drops out; the others go on."""
        scenario = CPU_BOUND
        self.results["cpu_bound.task_ms"] = entry = task_entry()
        self._say(f"cpu_bound: one task is {entry['rounds']:,} rounds, {fmt(entry['median'])} ms")
        await self._side_by_side((scenario,), scenario.topologies, scenario.worker_concurrency)
        self.results.update(speedups(self.results))

    async def _ha(self) -> None:
        """The durable control plane and the replicated one, side by side (``ha_scenario``),
        then ``kill -9`` of the replicated one's leader under load (``failover``)."""
        await self._side_by_side(ha_scenario.WORKLOADS, HA_TOPOLOGIES, None)
        self.results.update(ha_scenario.paired(self.results))

        async def failovers() -> Collected:
            return await measure_failovers(self.supervisor, self.config.repeats)

        await self._record(FAILOVER_UNITS, f"{ha_scenario.NAME}.{{}}.{REPLICATED}", failovers)

    async def _side_by_side(
        self, workloads: Sequence[Scenario], topologies: Sequence[str], concurrency: int | None
    ) -> None:
        """Every topology's cluster started first, then each repeat measures each workload
        on every topology in turn; results under ``workload.metric.topology``."""
        async with contextlib.AsyncExitStack() as stack:
            runs = await self._start_all(workloads, topologies, concurrency, stack)
            collected = await self._take_turns(workloads, runs)
        for topology in runs:
            for workload in workloads:
                for metric, unit in workload.units.items():
                    key = f"{workload.name}.{metric}"
                    if key in collected[topology]:  # not every topology reports every metric
                        values = collected[topology][key]
                        self.results[f"{key}.{topology}"] = summarize(values, unit)

    async def _start_all(
        self,
        workloads: Sequence[Scenario],
        topologies: Sequence[str],
        concurrency: int | None,
        stack: contextlib.AsyncExitStack,
    ) -> dict[str, tuple[Cluster, Client]]:
        """A ready cluster per topology (stopped when ``stack`` closes), and its client."""
        runs: dict[str, tuple[Cluster, Client]] = {}
        for topology in topologies:
            try:
                runs[topology] = await stack.enter_async_context(
                    open_cluster(self.supervisor, topology, concurrency)
                )
            except Exception as exc:
                for workload in workloads:
                    self._fail(workload.units, f"{workload.name}.{{}}.{topology}", exc)
        return runs

    async def _take_turns(
        self, workloads: Sequence[Scenario], runs: dict[str, tuple[Cluster, Client]]
    ) -> dict[str, Collected]:
        """Each repeat measures each workload on every topology in ``runs``, in ``turns``
        order; one that fails is recorded so (for every workload) and removed from
        ``runs``."""
        collected: dict[str, Collected] = {topology: {} for topology in runs}
        repeats = self.config.repeats
        for i in range(repeats):
            for workload in workloads:
                for topology in turns([t for t in workload.topologies if t in runs], i):
                    cluster, client = runs[topology]
                    try:
                        metrics = await self._measure(workload, cluster, client, topology)
                    except Exception as exc:
                        dead = cluster.dead_report()
                        for failed in workloads:
                            self._fail(failed.units, f"{failed.name}.{{}}.{topology}", exc, dead)
                        cluster.stop()  # its tasks left running would slow the others' turns
                        del runs[topology]
                        continue
                    self._progress(f"{workload.name} {topology} {i + 1}/{repeats}", metrics)
                    for metric, value in metrics.items():
                        key = f"{workload.name}.{metric}"
                        collected[topology].setdefault(key, []).append(value)
        return collected

    async def _measure(
        self, workload: Scenario, cluster: Cluster, client: Client, topology: str
    ) -> dict[str, float]:
        """One repeat of ``workload``, between the cluster's checks that it may be measured
        and that it ran as its topology says."""
        timeout = self._timeout(workload)
        run = Run(client, cluster.discovery, self.config.sizes, topology, timeout)
        await cluster.settle()
        metrics = await within(workload.measure(run), timeout)
        return {**metrics, **await cluster.check_measured()}

    def _timeout(self, scenario: Scenario) -> float:
        return self.config.timeout_for(scenario.tasks(self.config.sizes))

    async def _floor(self) -> Collected:
        s = self.config.sizes
        timeout = self.config.timeout_for(
            s.floor_latency + s.latency_warmup + s.floor_batched + s.floor_single
        )
        async with floor_session(self.supervisor) as client:
            return await self._repeat("floor", lambda: within(measure_floor(client, s), timeout))

    async def _blocking_floor(self) -> Collected:
        s = self.config.sizes
        timeout = self.config.timeout_for(s.floor_blocking + s.latency_warmup)
        async with blocking_floor_session(self.supervisor) as floor:
            return await self._repeat("floor blocking", lambda: within(floor.measure(s), timeout))

    async def _startup(self) -> Collected:
        runs = self.config.sizes.startup
        return await self._repeat("startup", lambda: asyncio.to_thread(measure_startup, runs))

    async def _memory(self) -> Collected:
        tasks = self.config.sizes.memory
        timeout = self.config.timeout_for(tasks)
        metrics = await within(measure_memory(self.supervisor, tasks, timeout), 2 * timeout)
        self._progress("memory", metrics)
        return {k: [v] for k, v in metrics.items()}

    async def _soak(self) -> Collected:
        s = self.config.sizes
        timeout = self.config.timeout_for(0)
        run = measure_soak(self.supervisor, s.soak_seconds, s.soak_rate, timeout)
        metrics = await within(run, s.soak_seconds + 2 * timeout)
        self._progress("soak", metrics)
        return {k: [v] for k, v in metrics.items()}

    async def _repeat(
        self, label: str, once: Callable[[], Awaitable[dict[str, float]]]
    ) -> Collected:
        collected: Collected = {}
        repeats = self.config.repeats
        for i in range(repeats):
            metrics = await once()
            self._progress(f"{label} {i + 1}/{repeats}", metrics)
            for metric, value in metrics.items():
                collected.setdefault(metric, []).append(value)
        return collected

    async def _record(
        self, units: dict[str, str], key: str, body: Callable[[], Awaitable[Collected]]
    ) -> None:
        try:
            collected = await body()
        except Exception as exc:  # recorded as this scenario's outcome; the run goes on
            self._fail(units, key, exc)
            return
        for metric, unit in units.items():
            self.results[key.format(metric)] = summarize(collected[metric], unit)

    def _fail(self, units: dict[str, str], key: str, exc: Exception, dead: str = "") -> None:
        """Record ``exc`` (and which processes died, if any) under each of ``key``'s metrics."""
        message = f"{type(exc).__name__}: {exc}" + (f" [{dead}]" if dead else "")
        self._say(f"{key.format('*')} FAILED: {message}")
        for metric in units:
            self.results[key.format(metric)] = {"error": message}

    def _progress(self, label: str, metrics: dict[str, float]) -> None:
        shown = ", ".join(f"{k}={fmt(v)}" for k, v in metrics.items())
        self._say(f"{label}: {shown}")

    def _say(self, line: str) -> None:
        print(f"[{time.monotonic() - self._started:7.1f} s] {line}", file=sys.stderr, flush=True)
