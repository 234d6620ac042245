"""The ``soak`` scenario: resident memory under steady load, for minutes.

A control plane (``--local-concurrency 0``, its default result cache: 10,000 results, so
the cache is full and evicting after the first seconds) and one subworker; one client
submits ``add`` tasks at a fixed rate with ``delay``, a tick's worth at a time (every
other one with an idempotency key, priorities in turn), and waits for each tick's last.
Every second the resident memory (VmRSS) of both processes is sampled. What a
long-running server must show is a flat line once warmed up: the keys are each
process's slope (least squares over the samples after the first quarter of the run, in
MiB per minute) and its peak.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Sequence

from bench.cluster import cluster_session
from bench.procs import Supervisor, rss_mib
from bench.scenarios import check
from fastworker import Client

SOAK_UNITS = {
    "tasks_per_s": "tasks/s",
    "rss_slope_mib_per_min.control_plane": "MiB/min",
    "rss_peak_mib.control_plane": "MiB",
    "rss_slope_mib_per_min.subworker": "MiB/min",
    "rss_peak_mib.subworker": "MiB",
}
PRIORITIES = ("high", "normal", "low")
RESULT_CACHE = 10_000  # results kept: the default, which the bench's flags raise
TICK_S = 0.05  # tasks are submitted in a burst every tick
SAMPLE_S = 1.0
WARM_UP_SHARE = 0.25  # of the run, left out of the slope


def slope_per_minute(samples: Sequence[tuple[float, float]]) -> float:
    """The least-squares slope of ``(seconds, MiB)`` samples, in MiB per minute."""
    n = len(samples)
    if n < 2:
        return 0.0
    mean_t = sum(t for t, _ in samples) / n
    mean_m = sum(m for _, m in samples) / n
    spread = sum((t - mean_t) ** 2 for t, _ in samples)
    if spread == 0:
        return 0.0
    covariance = sum((t - mean_t) * (m - mean_m) for t, m in samples)
    return covariance / spread * 60.0


def after_warm_up(samples: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    if not samples:
        return []
    cut = samples[0][0] + (samples[-1][0] - samples[0][0]) * WARM_UP_SHARE
    return [s for s in samples if s[0] >= cut]


def submit(client: Client, i: int) -> Awaitable[str]:
    key = f"soak-{i}" if i % 2 else None
    return client.delay("add", i, 1, priority=PRIORITIES[i % 3], idempotency_key=key)


async def measure_soak(
    supervisor: Supervisor,
    seconds: float,
    rate: int,
    timeout: float,
    result_cache: int = RESULT_CACHE,
) -> dict[str, float]:
    """One run of ``seconds`` at ``rate`` tasks/s on a fresh ``cp+1sw`` cluster whose
    control plane keeps ``result_cache`` results."""
    async with cluster_session(supervisor) as cluster:
        control_plane = cluster.start_control_plane(
            local_concurrency=0, extra=("--result-max-size", str(result_cache))
        )
        subworker = cluster.start_subworker(concurrency=None)
        async with cluster.client() as client:
            await cluster.wait_workers(client, remote=1, local=False)
            pids = {"control_plane": control_plane.pid, "subworker": subworker.pid}
            samples: dict[str, list[tuple[float, float]]] = {name: [] for name in pids}
            per_tick = max(1, round(rate * TICK_S))
            start = time.monotonic()
            next_sample = start
            submitted = 0
            while (now := time.monotonic()) - start < seconds:
                cluster.check_alive()
                burst = (submit(client, submitted + i) for i in range(per_tick))
                ids = await asyncio.gather(*burst)
                check([await client.wait_result(ids[-1], timeout)], [submitted + per_tick])
                submitted += per_tick
                if now >= next_sample:
                    for name, pid in pids.items():
                        samples[name].append((now - start, rss_mib(pid)))
                    next_sample += SAMPLE_S
                due = start + submitted / rate
                await asyncio.sleep(max(0.0, due - time.monotonic()))
            elapsed = time.monotonic() - start
    metrics = {"tasks_per_s": submitted / elapsed}
    for name, taken in samples.items():
        metrics[f"rss_slope_mib_per_min.{name}"] = slope_per_minute(after_warm_up(taken))
        metrics[f"rss_peak_mib.{name}"] = max(m for _, m in taken)
    return metrics
