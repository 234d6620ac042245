"""The measured scenarios run against a FastWorker cluster through the public SDK only.

Each ``measure_*`` function is one repeat: it runs the scenario once on a ready cluster
and returns its metrics. Every result is checked (status success, value as expected);
a wrong result fails the scenario, whatever its speed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import Any

from bench.cluster import SUBWORKERS
from bench.config import (
    IO_CONCURRENCY,
    IO_SLEEP_S,
    PIPELINE_DEPTH,
    SUBMIT_CHUNK,
    TOPOLOGIES,
    Sizes,
)
from bench.stats import latency_summary_ms
from fastworker import Client, TaskResult, TaskStatus


class WrongResult(AssertionError):
    """A task did not succeed with the value it should have."""


@dataclass(frozen=True)
class Run:
    """What one repeat of a scenario needs."""

    client: Client
    discovery: str  # the cluster's discovery address, for clients a scenario makes itself
    sizes: Sizes
    topology: str
    timeout: float


Measure = Callable[[Run], Awaitable[dict[str, float]]]


@dataclass(frozen=True)
class Scenario:
    name: str
    units: dict[str, str]  # metric -> unit, in report order
    tasks: Callable[[Sizes], int]  # how many tasks one repeat runs (for its timeout)
    measure: Measure
    worker_concurrency: int | None = None  # None: the CLI defaults
    topologies: tuple[str, ...] = TOPOLOGIES  # the topologies it runs on


def check(results: Sequence[TaskResult], expected: Sequence[Any]) -> None:
    if len(results) != len(expected):
        raise WrongResult(f"got {len(results)} results for {len(expected)} tasks")
    for result, value in zip(results, expected, strict=True):
        if result.status != TaskStatus.SUCCESS or result.result != value:
            raise WrongResult(
                f"task {result.task_id} ended {result.status} with {result.result!r} "
                f"(error {result.error}); expected success with {value!r}"
            )


async def submit_in_chunks(client: Client, chunks: Sequence[list[tuple[Any, ...]]]) -> list[str]:
    """One ``submit_batch`` call per chunk, one after the other; ids in order."""
    ids: list[str] = []
    for chunk in chunks:
        ids.extend(await client.submit_batch(chunk))
    return ids


def chunked(items: list[tuple[Any, ...]], size: int = SUBMIT_CHUNK) -> list[list[tuple[Any, ...]]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


async def measure_latency(run: Run) -> dict[str, float]:
    """Sequential ``submit_task`` round trips (each waits for its result)."""
    for i in range(run.sizes.latency_warmup):
        check([await run.client.submit_task("add", args=(i, 1))], [i + 1])
    samples: list[float] = []
    results: list[TaskResult] = []
    for i in range(run.sizes.latency):
        start = perf_counter()
        result = await run.client.submit_task("add", args=(i, 1))
        samples.append(perf_counter() - start)
        results.append(result)
    check(results, [i + 1 for i in range(run.sizes.latency)])
    return latency_summary_ms(samples)


async def measure_pipelined(run: Run) -> dict[str, float]:
    """``delay`` calls from one client, at most PIPELINE_DEPTH in flight, then every
    result fetched with ``wait_results``."""
    n = run.sizes.pipelined
    gate = asyncio.Semaphore(PIPELINE_DEPTH)

    async def submit(i: int) -> str:
        async with gate:
            return await run.client.delay("add", i, 1)

    start = perf_counter()
    ids = await asyncio.gather(*(submit(i) for i in range(n)))
    results = await run.client.wait_results(ids, timeout=run.timeout)
    elapsed = perf_counter() - start
    check(results, [i + 1 for i in range(n)])
    return {"tasks_per_s": n / elapsed}


async def _batched(run: Run, n: int, name: str, args: Callable[[int], tuple[Any, ...]]) -> float:
    """Submit ``n`` tasks in ``submit_batch`` calls of SUBMIT_CHUNK, wait for all; seconds."""
    chunks = chunked([(name, args(i)) for i in range(n)])
    start = perf_counter()
    ids = await submit_in_chunks(run.client, chunks)
    results = await run.client.wait_results(ids, timeout=run.timeout)
    elapsed = perf_counter() - start
    check(results, [_expected(name, args(i)) for i in range(n)])
    return elapsed


def _expected(name: str, args: tuple[Any, ...]) -> Any:
    return args[0] + args[1] if name == "add" else args[0]


async def measure_batch(run: Run) -> dict[str, float]:
    n = run.sizes.batch
    elapsed = await _batched(run, n, "add", lambda i: (i, i))
    return {"tasks_per_s": n / elapsed}


async def measure_io_bound(run: Run) -> dict[str, float]:
    """Sleeping tasks: throughput against total concurrency / sleep time."""
    n = run.sizes.io_bound
    elapsed = await _batched(run, n, "io_sleep", lambda i: (IO_SLEEP_S,))
    workers = max(1, SUBWORKERS[run.topology])
    ideal = workers * IO_CONCURRENCY / IO_SLEEP_S
    return {"tasks_per_s": n / elapsed, "ratio_to_ideal": n / elapsed / ideal}


LATENCY_UNITS = {"p50_ms": "ms", "p99_ms": "ms", "p999_ms": "ms"}

SCENARIOS: dict[str, Scenario] = {
    "latency": Scenario(
        "latency", LATENCY_UNITS, lambda s: s.latency + s.latency_warmup, measure_latency
    ),
    "pipelined": Scenario(
        "pipelined", {"tasks_per_s": "tasks/s"}, lambda s: s.pipelined, measure_pipelined
    ),
    "batch": Scenario("batch", {"tasks_per_s": "tasks/s"}, lambda s: s.batch, measure_batch),
    "io_bound": Scenario(
        "io_bound",
        {"tasks_per_s": "tasks/s", "ratio_to_ideal": "ratio"},
        lambda s: s.io_bound,
        measure_io_bound,
        worker_concurrency=IO_CONCURRENCY,
    ),
}
