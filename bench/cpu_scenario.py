"""The ``cpu_bound`` scenario: tasks burning about 20 ms of CPU in pure Python on one
subworker (the control plane only dispatching), as process tasks with a pool of 1 and of
2 children (2 slots; and 2 children with 4 slots), and as thread tasks (2 slots) for
contrast: ``CPU_WORKERS``.

The work is fixed, not timed: ``calibrate`` finds once per run how many rounds of
``bench_cpu_tasks.spin`` take CPU_TASK_S of CPU in this process, and every task of every
topology runs that many rounds, so their throughputs compare like for like. One repeat
submits a few untimed tasks (the children's and the slots' first ones), then
``sizes.cpu_bound`` tasks in one ``submit_batch`` and waits for every result (each
checked), timed from the submit to the last result. A speedup divides one topology's
tasks/s by another's, repeat by repeat: its median is the median of those ratios.

This VM's speed drifts by tens of percent within seconds (the same rounds take 20 ms,
then 30), which would bias any comparison of topologies measured one after the other,
so the runner starts every topology's cluster first and the repeats take turns
(``turns``).
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import Any

from bench.bench_cpu_tasks import spin
from bench.config import CPU_TASK_S, CPU_TOPOLOGIES
from bench.scenarios import Run, Scenario, check, chunked, submit_in_chunks
from bench.stats import summarize

CPU_UNITS = {"tasks_per_s": "tasks/s"}
THREADS = "cp+1sw+threads"
# speedup metric -> (numerator topology, denominator topology), of tasks/s
SPEEDUPS = {
    "speedup.2proc_over_1proc": ("cp+1sw+2proc", "cp+1sw+1proc"),
    "speedup.2proc_4slots_over_1proc": ("cp+1sw+2proc+4slots", "cp+1sw+1proc"),
    "speedup.threads_over_1proc": (THREADS, "cp+1sw+1proc"),
}
_PROBE_ROUNDS = 20_000


@dataclass(frozen=True)
class Work:
    """One task's work: ``rounds`` of ``spin``, ``seconds`` of CPU here, ending in ``value``."""

    rounds: int
    seconds: float
    value: int


def _cpu_seconds(rounds: int) -> float:
    start = time.thread_time()
    spin(rounds)
    return time.thread_time() - start


@functools.cache
def calibrate(target: float = CPU_TASK_S) -> Work:
    """The rounds of ``spin`` that take ``target`` seconds of CPU, and what they took (the
    median of a few tries each: this machine's speed moves within seconds)."""
    per_round = statistics.median(_cpu_seconds(_PROBE_ROUNDS) for _ in range(5)) / _PROBE_ROUNDS
    rounds = max(1, round(target / per_round))
    seconds = statistics.median(_cpu_seconds(rounds) for _ in range(3))
    return Work(rounds, seconds, spin(rounds))


def _task_name(topology: str) -> str:
    return "spin_thread" if topology == THREADS else "spin_process"


async def _run_tasks(run: Run, work: Work, n: int) -> float:
    """Submit ``n`` tasks, wait for every result and check it; seconds taken."""
    name = _task_name(run.topology)
    chunks = chunked([(name, (work.rounds,)) for _ in range(n)])
    start = perf_counter()
    ids = await submit_in_chunks(run.client, chunks)
    results = await run.client.wait_results(ids, timeout=run.timeout)
    elapsed = perf_counter() - start
    check(results, [work.value] * n)
    return elapsed


async def measure_cpu_bound(run: Run) -> dict[str, float]:
    work = calibrate()
    await _run_tasks(run, work, run.sizes.cpu_bound_warmup)
    n = run.sizes.cpu_bound
    return {"tasks_per_s": n / await _run_tasks(run, work, n)}


def turns(topologies: Sequence[str], repeat: int) -> list[str]:
    """The order of the topologies in repeat ``repeat``: rotated by one each time, so
    none is always measured first or last."""
    shift = repeat % len(topologies) if topologies else 0
    return [*topologies[shift:], *topologies[:shift]]


CPU_BOUND = Scenario(
    "cpu_bound",
    CPU_UNITS,
    lambda s: s.cpu_bound + s.cpu_bound_warmup,
    measure_cpu_bound,
    topologies=CPU_TOPOLOGIES,  # each with its own --processes and --concurrency
)


def task_entry() -> dict[str, Any]:
    """The calibrated work of one task, as a result entry (``cpu_bound.task_ms``)."""
    work = calibrate()
    ms = work.seconds * 1000.0
    return {"median": ms, "min": ms, "max": ms, "unit": "ms", "rounds": work.rounds}


def speedups(results: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``cpu_bound.speedup.*``: one topology's tasks/s over another's in the same repeat
    (measured seconds apart); median, min and max of those ratios. An error if either
    topology failed."""
    entries: dict[str, dict[str, Any]] = {}
    for metric, (top, bottom) in SPEEDUPS.items():
        of = [f"cpu_bound.tasks_per_s.{top}", f"cpu_bound.tasks_per_s.{bottom}"]
        a, b = (results.get(key, {}).get("values") for key in of)
        if not a or not b or len(a) != len(b):
            entries[f"cpu_bound.{metric}"] = {"error": f"no tasks/s for {top} and {bottom}"}
            continue
        ratios = [x / y for x, y in zip(a, b, strict=True)]
        entries[f"cpu_bound.{metric}"] = {**summarize(ratios, "ratio"), "of": of}
    return entries
