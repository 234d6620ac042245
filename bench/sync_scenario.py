"""The ``sync`` scenario: the blocking ``SyncClient`` called the way most applications call
it (a script, a WSGI view: one ``delay`` per task, from one thread), in the shape the peer
task queues of issue 16 are measured with.

One repeat, on a fresh ``SyncClient`` created and closed in a worker thread, so the
benchmark's event loop (idle meanwhile) never runs on its path: a few untimed round trips;
``sync`` ``delay("add", i, 1)`` calls one at a time (enqueue-only tasks/s), then every
result waited in order with ``wait_results`` (end to end tasks/s over both phases); a few
untimed round trips again; then ``sync_round_trips`` sequential ``submit_task`` round trips
(p50/p99). Every result is checked.
"""

from __future__ import annotations

import threading
import time
from time import perf_counter

from bench.blocking import in_thread, steps
from bench.cluster import CLIENT_TIMEOUT
from bench.config import SYNC_TOPOLOGIES, Sizes
from bench.scenarios import Run, Scenario, check
from bench.stats import latency_summary_ms
from fastworker import SyncClient, TaskResult

SYNC_UNITS = {"enqueue_per_s": "tasks/s", "e2e_per_s": "tasks/s", "p50_ms": "ms", "p99_ms": "ms"}


async def measure_sync(run: Run) -> dict[str, float]:
    return await in_thread(lambda abandoned: _one_repeat(run, abandoned))


def _one_repeat(run: Run, abandoned: threading.Event) -> dict[str, float]:
    deadline = time.monotonic() + run.timeout
    sizes = run.sizes
    with SyncClient(run.discovery, timeout=CLIENT_TIMEOUT) as client:
        _round_trips(client, sizes.sync_warmup, abandoned)
        metrics = _delay_then_wait(client, sizes, deadline, abandoned)
        _round_trips(client, sizes.sync_post_burst, abandoned)
        samples = _round_trips(client, sizes.sync_round_trips, abandoned)
    summary = latency_summary_ms(samples)
    metrics.update(p50_ms=summary["p50_ms"], p99_ms=summary["p99_ms"])
    return metrics


def _delay_then_wait(
    client: SyncClient, sizes: Sizes, deadline: float, abandoned: threading.Event
) -> dict[str, float]:
    n = sizes.sync
    start = perf_counter()
    ids = [client.delay("add", i, 1) for i in steps(n, abandoned)]
    enqueued = perf_counter()
    results = client.wait_results(ids, timeout=max(0.0, deadline - time.monotonic()))
    done = perf_counter()
    check(results, [i + 1 for i in range(n)])
    return {"enqueue_per_s": n / (enqueued - start), "e2e_per_s": n / (done - start)}


def _round_trips(client: SyncClient, count: int, abandoned: threading.Event) -> list[float]:
    """``count`` sequential ``submit_task`` round trips, checked; their times in seconds."""
    samples: list[float] = []
    results: list[TaskResult] = []
    for i in steps(count, abandoned):
        start = perf_counter()
        result = client.submit_task("add", args=(i, 1))
        samples.append(perf_counter() - start)
        results.append(result)
    check(results, [i + 1 for i in range(count)])
    return samples


SYNC = Scenario(
    "sync",
    SYNC_UNITS,
    lambda s: s.sync + s.sync_round_trips + s.sync_warmup + s.sync_post_burst,
    measure_sync,
    topologies=SYNC_TOPOLOGIES,
)
