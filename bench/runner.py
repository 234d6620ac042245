"""Runs the selected scenarios, each repeated, and collects one summary per metric key.

Keys are ``scenario.metric.topology`` (``latency.p50_ms.cp+1sw``), or ``scenario.metric``
for the topology-independent ones (``memory.rss_mb.idle``, ``floor.tasks_per_s.single``,
``cpu_bound.speedup.2proc_over_1proc``).
A scenario that fails records ``{"error": ...}`` under each of its keys and the run goes
on; only cancellation (Ctrl-C) stops it.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from bench.cluster import Cluster, running_cluster
from bench.config import BenchConfig
from bench.cpu_scenario import CPU_BOUND, speedups, task_entry, turns
from bench.floor import FLOOR_UNITS, floor_session, measure_floor
from bench.floor_blocking import BLOCKING_FLOOR_UNITS, blocking_floor_session
from bench.memory import MEMORY_UNITS, measure_memory
from bench.procs import Supervisor
from bench.report import fmt
from bench.scenarios import SCENARIOS, Run, Scenario
from bench.stats import summarize
from bench.sync_scenario import SYNC
from fastworker import FastWorkerError

Collected = dict[str, list[float]]
CLUSTER_SCENARIOS: dict[str, Scenario] = {**SCENARIOS, SYNC.name: SYNC}


class ScenarioTimeout(RuntimeError):
    pass


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
            if name == "floor":
                await self._record(FLOOR_UNITS, "floor.{}", self._floor)
                await self._record(BLOCKING_FLOOR_UNITS, "floor.{}", self._blocking_floor)
            elif name == "memory":
                await self._record(MEMORY_UNITS, "memory.{}", self._memory)
            elif name == CPU_BOUND.name:
                await self._cpu_bound()
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
        async with contextlib.AsyncExitStack() as stack:
            runs = await self._start_all(scenario, stack)
            collected = await self._take_turns(scenario, runs)
        for topology in runs:
            for metric, unit in scenario.units.items():
                key = f"{scenario.name}.{metric}.{topology}"
                self.results[key] = summarize(collected[topology][metric], unit)
        self.results.update(speedups(self.results))

    async def _start_all(
        self, scenario: Scenario, stack: contextlib.AsyncExitStack
    ) -> dict[str, tuple[Cluster, Run]]:
        """A ready cluster per topology (stopped when ``stack`` closes), and its ``Run``."""
        runs: dict[str, tuple[Cluster, Run]] = {}
        for topology in scenario.topologies:
            try:
                cluster, client = await stack.enter_async_context(
                    running_cluster(self.supervisor, topology, scenario.worker_concurrency)
                )
            except Exception as exc:
                self._fail(scenario.units, f"{scenario.name}.{{}}.{topology}", exc)
                continue
            timeout = self._timeout(scenario)
            runs[topology] = (
                cluster,
                Run(client, cluster.discovery, self.config.sizes, topology, timeout),
            )
        return runs

    async def _take_turns(
        self, scenario: Scenario, runs: dict[str, tuple[Cluster, Run]]
    ) -> dict[str, Collected]:
        """Each repeat measures every topology in ``runs``, in ``turns`` order; one that
        fails is recorded so and removed from ``runs``."""
        collected: dict[str, Collected] = {topology: {} for topology in runs}
        repeats = self.config.repeats
        for i in range(repeats):
            for topology in turns([t for t in scenario.topologies if t in runs], i):
                cluster, run = runs[topology]
                try:
                    metrics = await within(scenario.measure(run), run.timeout)
                except Exception as exc:
                    key = f"{scenario.name}.{{}}.{topology}"
                    self._fail(scenario.units, key, exc, cluster.dead_report())
                    cluster.stop()  # its tasks left running would slow the others' turns
                    del runs[topology]
                    continue
                self._progress(f"{scenario.name} {topology} {i + 1}/{repeats}", metrics)
                for metric, value in metrics.items():
                    collected[topology].setdefault(metric, []).append(value)
        return collected

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

    async def _memory(self) -> Collected:
        tasks = self.config.sizes.memory
        timeout = self.config.timeout_for(tasks)
        metrics = await within(measure_memory(self.supervisor, tasks, timeout), 2 * timeout)
        self._progress("memory", metrics)
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
