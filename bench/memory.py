"""The ``memory`` scenario: the control plane's resident memory (VmRSS) when idle, with a
large backlog queued and no worker to run it, and after a subworker has drained it.

"Drained" still holds every result: the control plane is started with
``--result-max-size 200000``, so the result cache keeps all of them until they expire.
"""

from __future__ import annotations

from bench.cluster import cluster_session
from bench.procs import Supervisor
from bench.scenarios import check, chunked, submit_in_chunks

MEMORY_UNITS = {"rss_mb.idle": "MiB", "rss_mb.queued_100k": "MiB", "rss_mb.drained": "MiB"}


async def measure_memory(supervisor: Supervisor, tasks: int, timeout: float) -> dict[str, float]:
    """One run on a fresh control plane with ``--local-concurrency 0``."""
    async with cluster_session(supervisor) as cluster:
        cluster.start_control_plane(local_concurrency=0)
        async with cluster.client() as client:
            await cluster.wait_workers(client, remote=0, local=False)
            idle = cluster.control_plane_rss_mib()
            ids = await submit_in_chunks(client, chunked([("add", (i, i)) for i in range(tasks)]))
            queued = cluster.control_plane_rss_mib()
            cluster.start_subworker(concurrency=None)
            await cluster.wait_workers(client, remote=1, local=False)
            results = await client.wait_results(ids, timeout=timeout)
            check(results, [2 * i for i in range(tasks)])
            drained = cluster.control_plane_rss_mib()
    return {"rss_mb.idle": idle, "rss_mb.queued_100k": queued, "rss_mb.drained": drained}
