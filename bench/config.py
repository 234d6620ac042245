"""What the benchmark runs: sizes (full and smoke), topologies, the control plane flags."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

SCENARIOS = (
    "startup",
    "floor",
    "latency",
    "pipelined",
    "batch",
    "io_bound",
    "sync",
    "memory",
    "cpu_bound",
    "ha",
    "chord",
    "soak",
)
TOPOLOGY_SCENARIOS = ("latency", "pipelined", "batch", "io_bound", "sync")
TOPOLOGIES = ("cp", "cp+1sw", "cp+2sw", "cp+1sw+journal")
# `sync` is the peers' shape (control plane that only dispatches + one subworker), so it
# runs on that topology alone.
SYNC_TOPOLOGIES = ("cp+1sw",)
# `cpu_bound` runs on one subworker (the control plane only dispatches), topology ->
# (--processes, --concurrency): its process tasks with a pool of 1 and of 2 children, 2
# children with 4 slots (a task waits beside each child: no child idles while its next
# task is on its way), and the same work as a thread task (its subworker has one idle
# child: it loads the process task too).
CPU_WORKERS = {
    "cp+1sw+1proc": (1, 2),
    "cp+1sw+2proc": (2, 2),
    "cp+1sw+2proc+4slots": (2, 4),
    "cp+1sw+threads": (1, 2),
}
CPU_TOPOLOGIES = tuple(CPU_WORKERS)
# `ha` (issue 20) compares replicated control planes with the durable single one: both
# clusters are started first and the repeats take turns between them, as in `cpu_bound`.
DURABLE = "cp+1sw+journal"
REPLICATED = "cp-ha"
HA_TOPOLOGIES = (DURABLE, REPLICATED)
ALL_TOPOLOGIES = (*TOPOLOGIES, *CPU_TOPOLOGIES, REPLICATED)
CPU_TASK_S = 0.020  # the CPU one cpu_bound task burns, calibrated on this machine at start

RESULT_MAX_SIZE = 200_000  # so a 100,000-task run is not evicted before it is fetched
SUBMIT_CHUNK = 1_000  # tasks per submit_batch call
PIPELINE_DEPTH = 256  # delay calls in flight in `pipelined`
IO_SLEEP_S = 0.01
IO_CONCURRENCY = 100
FLOOR_BATCH = 1_000  # tasks per message in floor.tasks_per_s.batched
FLOOR_BATCHES_IN_FLIGHT = 4
SHUTDOWN_TIMEOUT_S = 5  # how long a stopping process may drain (a stop kills after 15 s)
COMMON_FLAGS = ["--log-level", "warning", "--shutdown-timeout", str(SHUTDOWN_TIMEOUT_S)]
# The HTTP port is off so runs never collide on 8080; idle, it costs nothing per task (the
# statistics behind /metrics are recorded either way).
CONTROL_PLANE_FLAGS = [
    "--result-max-size",
    str(RESULT_MAX_SIZE),
    "--http-port",
    "0",
    *COMMON_FLAGS,
]
SUBWORKER_FLAGS = list(COMMON_FLAGS)


@dataclass(frozen=True)
class Sizes:
    latency: int = 2_000
    latency_warmup: int = 100
    pipelined: int = 20_000
    batch: int = 100_000
    io_bound: int = 5_000
    memory: int = 100_000
    startup: int = 20  # starts of each command, of which the median is kept
    floor_latency: int = 2_000
    floor_batched: int = 500_000  # fast: fewer tasks would be measured over ~0.25 s
    floor_single: int = 20_000
    floor_blocking: int = 10_000  # blocking round trips, after latency_warmup untimed ones
    sync: int = 5_000  # SyncClient.delay calls, one at a time, then every result waited
    sync_round_trips: int = 500  # sequential SyncClient.submit_task round trips
    sync_warmup: int = 50  # untimed round trips before the delay calls (as the peers)
    sync_post_burst: int = 10  # untimed round trips between the delay calls and the timed ones
    cpu_bound: int = 100  # tasks of CPU_TASK_S each, in one submit_batch, then every result
    cpu_bound_warmup: int = 4  # untimed tasks first (the children's and slots' first ones)
    chord: int = 10_000  # members of one chord (plus its callback), submitted as one workflow
    soak_seconds: float = 300.0  # steady load, sampling both processes' memory
    soak_rate: int = 2_000  # tasks/s submitted during the soak


SMOKE_SIZES = Sizes(
    latency=200,
    latency_warmup=20,
    pipelined=300,
    batch=500,
    io_bound=200,
    memory=500,
    startup=3,
    floor_latency=200,
    floor_batched=5_000,
    floor_single=300,
    floor_blocking=200,
    sync=300,
    sync_round_trips=50,
    sync_warmup=10,
    sync_post_burst=5,
    cpu_bound=20,
    cpu_bound_warmup=2,
    chord=50,
    soak_seconds=4.0,
    soak_rate=200,
)


@dataclass(frozen=True)
class BenchConfig:
    sizes: Sizes = field(default_factory=Sizes)
    repeats: int = 3
    smoke: bool = False
    only: tuple[str, ...] = SCENARIOS

    def timeout_for(self, tasks: int) -> float:
        """Seconds one measured run may take before it counts as failed (>= 200 tasks/s)."""
        return 60.0 + tasks / 200.0

    def as_json(self) -> dict[str, Any]:
        return {
            "sizes": asdict(self.sizes),
            "repeats": self.repeats,
            "smoke": self.smoke,
            "scenarios": list(self.only),
            "topologies": list(TOPOLOGIES),
            "sync_topologies": list(SYNC_TOPOLOGIES),
            "cpu_workers": {
                t: {"processes": p, "concurrency": c} for t, (p, c) in CPU_WORKERS.items()
            },
            "cpu_task_s": CPU_TASK_S,
            "submit_chunk": SUBMIT_CHUNK,
            "pipeline_depth": PIPELINE_DEPTH,
            "io_sleep_s": IO_SLEEP_S,
            "io_concurrency": IO_CONCURRENCY,
            "floor_batch": FLOOR_BATCH,
            "floor_batches_in_flight": FLOOR_BATCHES_IN_FLIGHT,
            "control_plane_flags": CONTROL_PLANE_FLAGS,
            "subworker_flags": SUBWORKER_FLAGS,
            "local_concurrency": {
                "cp": "default (CPU count)",
                "cp+1sw": 0,
                "cp+2sw": 0,
                "cp+1sw+journal": 0,
                **dict.fromkeys(CPU_TOPOLOGIES, 0),
                REPLICATED: 0,
            },
            "journal": "cp+1sw+journal: cp+1sw with --state-dir in a fresh temporary directory",
            "ha_topologies": list(HA_TOPOLOGIES),
            "chord_topologies": ["cp+1sw", DURABLE],
            "replicated": (
                "cp-ha: etcd (one member) + 2 control planes with --leader-election, each with "
                "its own --state-dir in a fresh temporary directory, --sync-replicas 1 "
                "(default) and --http-port on (for /readyz), + 1 subworker dialing the leader"
            ),
            "io_bound_concurrency": "--local-concurrency 100 (cp), --concurrency 100 (subworkers)",
        }
